// Dynamically quantized linear layers (int8 activations quantized per row at
// run time) against the fp32 fully-connected layer of the same size, all
// through etna's XNNPACK delegate, one thread, same run: 8da4w (4-bit weights
// in blocks of 32 with bf16 scales: what ExecuTorch's export_llama writes) and
// 8da8w (8-bit weights, one scale per output channel).
//
//   cmake --build build-native --target etna_dynquant_bench
//   build-native/etna_dynquant_bench [in] [out] [rounds] [threads]   (default 2048 2048 7 1)
//
// Prints, per batch size (1 and 64), the median CPU milliseconds per call of
// fp32, and of each quantized layer on every vector dot-product path the CPU
// has (the portable one only when there is none), with their ratios to fp32.
// With more than one thread the module has a pool of that many and the
// times are wall milliseconds.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "delegate_timing.h"

namespace {

using etna::test::LocalTensor;
using etna::test::PayloadBuilder;
namespace fbx = ::etna::xnnpack;
namespace xnn = ::etna::xnn;

std::vector<uint8_t> fp32_linear(size_t batch, size_t in, size_t out, PayloadBuilder& b) {
  const auto w = etna::test::pseudo_random(in * out, 1, 0.05f);
  const auto bias = etna::test::pseudo_random(out, 2, 0.1f);
  const uint32_t x = b.input({uint32_t(batch), uint32_t(in)}, 0);
  const uint32_t filter = b.constant({uint32_t(out), uint32_t(in)}, w);
  const uint32_t bias_id = b.constant({uint32_t(out)}, bias);
  const uint32_t y = b.output({uint32_t(batch), uint32_t(out)}, 1);
  b.fully_connected(x, filter, bias_id, y);
  return b.finish(PayloadBuilder::Layout::kNamedData, 2);
}

// Convert -> FullyConnected over pseudo-random weights: qbint4 in blocks of
// `group` with bf16 scales, or qcint8 (group 0) with one scale per channel.
std::vector<uint8_t> quantized_linear(size_t batch, size_t in, size_t out, size_t group, PayloadBuilder& b) {
  const bool four_bit = group != 0;
  std::vector<uint8_t> codes(out * (four_bit ? (in + 1) / 2 : in));
  uint32_t state = 7;
  for (uint8_t& byte : codes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<uint8_t>(state >> 24);
  }
  const auto bias = etna::test::pseudo_random(out, 2, 0.1f);
  const uint32_t x = b.input({uint32_t(batch), uint32_t(in)}, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 1);
  const uint32_t q = b.quantized_with(fbx::Datatype::qdint8, {uint32_t(batch), uint32_t(in)},
                                      fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  uint32_t filter = 0;
  if (four_bit) {
    std::vector<uint16_t> scales(out * (in / group), 0x3c00);  // bf16 0.0078125
    auto params = fbx::CreatePerChannelGroupQuant(b.fbb(), 0, 0, int32_t(group), b.fbb().CreateVector(scales));
    filter = b.quantized_with(fbx::Datatype::qbint4, {uint32_t(out), uint32_t(in)},
                              fbx::QuantParams::PerChannelGroupQuant, params.Union(), &codes);
  } else {
    filter =
        b.channelwise(fbx::Datatype::qcint8, {uint32_t(out), uint32_t(in)}, std::vector<float>(out, 0.0005f), 0, codes);
  }
  const uint32_t bias_id = b.constant({uint32_t(out)}, bias);
  const uint32_t y = b.output({uint32_t(batch), uint32_t(out)}, 1);
  b.unary(fbx::NodeUnion::XNNConvert, x, q);
  b.fully_connected(q, filter, bias_id, y);
  return b.finish(PayloadBuilder::Layout::kNamedData, 2);
}

double time_delegate(const std::vector<uint8_t>& payload, const PayloadBuilder& b, size_t batch, size_t in, size_t out,
                     int rounds, int threads) {
  LocalTensor input(etna::ScalarType::kFloat, {int64_t(batch), int64_t(in)});
  input.fill(etna::test::pseudo_random(batch * in, 3, 1.0f));
  LocalTensor output(etna::ScalarType::kFloat, {int64_t(batch), int64_t(out)});
  return etna::bench::median_ms_per_call(payload, b, input, output, batch == 1 ? 200 : 10, rounds, threads);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t in = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2048;
  const size_t out = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2048;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  const int threads = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  std::printf("best dot-product path on this CPU: %s; %d thread(s), %s time\n",
              xnn::dot_path_name(xnn::active_dot_path()), threads, threads > 1 ? "wall" : "CPU");
  // The vector paths, else the portable one.
  std::vector<xnn::DotPath> paths = xnn::available_dot_paths();
  if (paths.size() > 1) paths.erase(paths.begin());
  struct Layer {
    const char* name;
    size_t group;  // 0: per-channel 8-bit
  };
  const Layer layers[] = {{"8da4w (qb4w group 32)", 32}, {"8da8w (qc8w)", 0}};
  for (size_t batch : {size_t{1}, size_t{64}}) {
    PayloadBuilder fp32_builder;
    const auto fp32 = fp32_linear(batch, in, out, fp32_builder);
    const double fp32_ms = time_delegate(fp32, fp32_builder, batch, in, out, rounds, threads);
    std::printf("batch %zu, %zux%zu: fp32 %.3f ms\n", batch, in, out, fp32_ms);
    for (const Layer& layer : layers) {
      PayloadBuilder builder;
      const auto payload = quantized_linear(batch, in, out, layer.group, builder);
      for (xnn::DotPath path : paths) {
        xnn::force_dot_path(path);
        const double ms = time_delegate(payload, builder, batch, in, out, rounds, threads);
        xnn::clear_forced_dot_path();
        std::printf("  %s on %s: %.3f ms, /fp32 %.2f\n", layer.name, xnn::dot_path_name(path), ms, ms / fp32_ms);
      }
    }
  }
  return 0;
}
