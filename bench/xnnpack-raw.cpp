// The benchmark models of bench/xnnpack-bench.mjs written directly against
// the XNNPACK operator API, one thread: the floor etna's delegate is measured
// against. Weights come from the same generator as the JS side, so the output
// checksums must agree.
//
//   xnnpack-raw mlp <batch> <calls-per-round> <rounds>
//   xnnpack-raw conv <calls-per-round> <rounds>
//
// Prints one JSON object: per-call wall and CPU milliseconds (median over
// rounds of the round mean) and the sum of the outputs.
#include <xnnpack.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

// Same linear congruential generator as the JS models: values in [-scale, scale).
std::vector<float> random_values(size_t count, uint32_t seed, double scale) {
  std::vector<float> out(count);
  uint32_t state = seed;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    out[i] = static_cast<float>((static_cast<double>(state) / 4294967296.0 * 2.0 - 1.0) * scale);
  }
  return out;
}

void check(xnn_status status, const char* what) {
  if (status != xnn_status_success) {
    std::fprintf(stderr, "%s failed with status %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

// XNNPACK may read 16 bytes past an input: every buffer gets spare room.
std::vector<float> padded(size_t count) { return std::vector<float>(count + 16, 0.0f); }

struct Timing {
  double wall_ms;
  double cpu_ms;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Wall time and process CPU time per call; CPU time ignores the time other
// processes hold the core, which dominates on a loaded machine.
Timing time_calls(const std::function<void()>& call, int calls, int rounds) {
  for (int i = 0; i < std::max(5, calls / 4); ++i) call();
  std::vector<double> wall;
  std::vector<double> cpu;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    for (int i = 0; i < calls; ++i) call();
    const std::clock_t cpu_end = std::clock();
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    wall.push_back(elapsed.count() / calls);
    cpu.push_back(1000.0 * static_cast<double>(cpu_end - cpu_start) / CLOCKS_PER_SEC / calls);
  }
  return {median(wall), median(cpu)};
}

constexpr size_t kFeatures = 1024;
constexpr int kLayers = 4;

void run_mlp(size_t batch, int calls, int rounds) {
  std::vector<xnn_operator_t> layers;
  std::vector<std::vector<float>> weights;
  for (int l = 0; l < kLayers; ++l) {
    weights.push_back(random_values(kFeatures * kFeatures, 100 + l, 0.03));
    const std::vector<float> bias = random_values(kFeatures, 200 + l, 0.1);
    const float lower = l + 1 < kLayers ? 0.0f : -std::numeric_limits<float>::infinity();
    xnn_operator_t op = nullptr;
    check(xnn_create_fully_connected_nc_f32(kFeatures, kFeatures, kFeatures, kFeatures, weights.back().data(),
                                            bias.data(), lower, std::numeric_limits<float>::infinity(), 0, &op),
          "xnn_create_fully_connected_nc_f32");
    layers.push_back(op);
  }
  const std::vector<float> input_values = random_values(batch * kFeatures, 7, 1.0);
  std::vector<float> input = padded(batch * kFeatures);
  std::copy(input_values.begin(), input_values.end(), input.begin());
  std::vector<float> ping = padded(batch * kFeatures);
  std::vector<float> pong = padded(batch * kFeatures);

  const auto forward = [&] {
    const float* source = input.data();
    for (int l = 0; l < kLayers; ++l) {
      float* target = (l % 2 == 0) ? ping.data() : pong.data();
      check(xnn_setup_fully_connected_nc_f32(layers[l], batch, source, target, nullptr),
            "xnn_setup_fully_connected_nc_f32");
      check(xnn_run_operator(layers[l], nullptr), "xnn_run_operator");
      source = target;
    }
  };
  const Timing timing = time_calls(forward, calls, rounds);
  double checksum = 0;
  const std::vector<float>& result = (kLayers % 2 == 0) ? pong : ping;
  for (size_t i = 0; i < batch * kFeatures; ++i) checksum += result[i];
  std::printf("{\"model\":\"mlp\",\"batch\":%zu,\"ms\":%.6f,\"cpuMs\":%.6f,\"checksum\":%.9g}\n", batch, timing.wall_ms,
              timing.cpu_ms, checksum);
  for (xnn_operator_t op : layers) xnn_delete_operator(op);
}

struct ConvLayer {
  size_t in_channels, out_channels, stride;
};
constexpr ConvLayer kConvLayers[] = {{3, 16, 1}, {16, 32, 2}, {32, 32, 1}};
constexpr size_t kImage = 64;

void run_conv(int calls, int rounds) {
  struct Stage {
    xnn_operator_t op;
    size_t in_size, out_size, out_channels;
    std::vector<float> output;
  };
  std::vector<Stage> stages;
  size_t size = kImage;
  int index = 0;
  for (const ConvLayer& layer : kConvLayers) {
    const size_t kernel = 3;
    const std::vector<float> oihw =
        random_values(layer.out_channels * layer.in_channels * kernel * kernel, 300 + index, 0.2);
    const std::vector<float> bias = random_values(layer.out_channels, 400 + index, 0.05);
    // XNNPACK wants filters as [O, KH, KW, I].
    std::vector<float> ohwi(oihw.size());
    for (size_t o = 0; o < layer.out_channels; ++o)
      for (size_t i = 0; i < layer.in_channels; ++i)
        for (size_t y = 0; y < kernel; ++y)
          for (size_t x = 0; x < kernel; ++x)
            ohwi[((o * kernel + y) * kernel + x) * layer.in_channels + i] =
                oihw[((o * layer.in_channels + i) * kernel + y) * kernel + x];
    xnn_operator_t op = nullptr;
    check(xnn_create_convolution2d_nhwc_f32(1, 1, 1, 1, 3, 3, layer.stride, layer.stride, 1, 1, 1, layer.in_channels,
                                            layer.out_channels, layer.in_channels, layer.out_channels, ohwi.data(),
                                            bias.data(), 0.0f, std::numeric_limits<float>::infinity(), 0, &op),
          "xnn_create_convolution2d_nhwc_f32");
    const size_t out_size = (size + 2 - 3) / layer.stride + 1;
    stages.push_back({op, size, out_size, layer.out_channels, padded(out_size * out_size * layer.out_channels)});
    size = out_size;
    ++index;
  }
  const size_t channels = kConvLayers[0].in_channels;
  const std::vector<float> nchw = random_values(channels * kImage * kImage, 9, 1.0);
  std::vector<float> nhwc = padded(nchw.size());
  const Stage& last = stages.back();
  std::vector<float> result(last.out_size * last.out_size * last.out_channels);

  const auto forward = [&] {
    // The graph takes and returns NCHW, like the etna program: layout changes are part of the work.
    for (size_t c = 0; c < channels; ++c)
      for (size_t p = 0; p < kImage * kImage; ++p) nhwc[p * channels + c] = nchw[c * kImage * kImage + p];
    const float* source = nhwc.data();
    for (Stage& stage : stages) {
      check(xnn_setup_convolution2d_nhwc_f32(stage.op, 1, stage.in_size, stage.in_size, source, stage.output.data(),
                                             nullptr),
            "xnn_setup_convolution2d_nhwc_f32");
      check(xnn_run_operator(stage.op, nullptr), "xnn_run_operator");
      source = stage.output.data();
    }
    const size_t pixels = last.out_size * last.out_size;
    for (size_t p = 0; p < pixels; ++p)
      for (size_t c = 0; c < last.out_channels; ++c) result[c * pixels + p] = last.output[p * last.out_channels + c];
  };
  const Timing timing = time_calls(forward, calls, rounds);
  double checksum = 0;
  for (float v : result) checksum += v;
  std::printf("{\"model\":\"conv\",\"batch\":1,\"ms\":%.6f,\"cpuMs\":%.6f,\"checksum\":%.9g}\n", timing.wall_ms,
              timing.cpu_ms, checksum);
  for (Stage& stage : stages) xnn_delete_operator(stage.op);
}

}  // namespace

int main(int argc, char** argv) {
  check(xnn_initialize(nullptr), "xnn_initialize");
  const std::string model = argc > 1 ? argv[1] : "";
  if (model == "mlp" && argc == 5) {
    run_mlp(std::strtoul(argv[2], nullptr, 10), std::atoi(argv[3]), std::atoi(argv[4]));
  } else if (model == "conv" && argc == 4) {
    run_conv(std::atoi(argv[2]), std::atoi(argv[3]));
  } else {
    std::fprintf(stderr, "usage: %s mlp <batch> <calls> <rounds> | conv <calls> <rounds>\n", argv[0]);
    return 2;
  }
  return 0;
}
