// An 8da4w linear layer (int8 activations quantized per row at run time,
// 4-bit weights in blocks of 32 with bf16 scales: what ExecuTorch's
// export_llama writes) against the fp32 fully-connected layer of the same
// size, both through etna's XNNPACK delegate, one thread, same run.
//
//   cmake --build build-native --target etna_dynquant_bench
//   build-native/etna_dynquant_bench [in] [out] [rounds]      (default 2048 2048 7)
//
// Prints, per batch size (1 and 64), the median milliseconds per call of
// fp32, and of 8da4w on each vector path the CPU has, with their ratios.
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

std::vector<uint8_t> int4_linear(size_t batch, size_t in, size_t out, size_t group, PayloadBuilder& b) {
  std::vector<uint8_t> nibbles(out * ((in + 1) / 2));
  uint32_t state = 7;
  for (uint8_t& byte : nibbles) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<uint8_t>(state >> 24);
  }
  std::vector<uint16_t> scales(out * (in / group), 0x3c00);  // bf16 0.0078125
  const auto bias = etna::test::pseudo_random(out, 2, 0.1f);
  const uint32_t x = b.input({uint32_t(batch), uint32_t(in)}, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 1);
  const uint32_t q = b.quantized_with(fbx::Datatype::qdint8, {uint32_t(batch), uint32_t(in)},
                                      fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  auto params = fbx::CreatePerChannelGroupQuant(b.fbb(), 0, 0, int32_t(group), b.fbb().CreateVector(scales));
  const uint32_t filter = b.quantized_with(fbx::Datatype::qbint4, {uint32_t(out), uint32_t(in)},
                                           fbx::QuantParams::PerChannelGroupQuant, params.Union(), &nibbles);
  const uint32_t bias_id = b.constant({uint32_t(out)}, bias);
  const uint32_t y = b.output({uint32_t(batch), uint32_t(out)}, 1);
  b.unary(fbx::NodeUnion::XNNConvert, x, q);
  b.fully_connected(q, filter, bias_id, y);
  return b.finish(PayloadBuilder::Layout::kNamedData, 2);
}

double time_delegate(const std::vector<uint8_t>& payload, const PayloadBuilder& b, size_t batch, size_t in,
                     size_t out, int rounds) {
  LocalTensor input(etna::ScalarType::kFloat, {int64_t(batch), int64_t(in)});
  input.fill(etna::test::pseudo_random(batch * in, 3, 1.0f));
  LocalTensor output(etna::ScalarType::kFloat, {int64_t(batch), int64_t(out)});
  return etna::bench::median_ms_per_call(payload, b, input, output, batch == 1 ? 200 : 10, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t in = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2048;
  const size_t out = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2048;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  const size_t group = 32;
  std::printf("best dot-product path on this CPU: %s\n", xnn::dot_path_name(xnn::active_dot_path()));
  for (size_t batch : {size_t{1}, size_t{64}}) {
    PayloadBuilder fp32_builder, int4_builder;
    const auto fp32 = fp32_linear(batch, in, out, fp32_builder);
    const auto int4 = int4_linear(batch, in, out, group, int4_builder);
    const double fp32_ms = time_delegate(fp32, fp32_builder, batch, in, out, rounds);
    std::printf("batch %zu, %zux%zu: fp32 %.3f ms\n", batch, in, out, fp32_ms);
    // Every vector path the CPU has (the portable one only when there is none).
    for (xnn::DotPath path : {xnn::DotPath::kAvx2, xnn::DotPath::kScalar}) {
      if (!xnn::dot_path_available(path)) continue;
      if (path == xnn::DotPath::kScalar && xnn::dot_path_available(xnn::DotPath::kAvx2)) continue;
      xnn::force_dot_path(path);
      const double int4_ms = time_delegate(int4, int4_builder, batch, in, out, rounds);
      xnn::clear_forced_dot_path();
      std::printf("  8da4w (qb4w group %zu) on %s: %.3f ms, 8da4w/fp32 %.2f\n", group, xnn::dot_path_name(path),
                  int4_ms, int4_ms / fp32_ms);
    }
  }
  return 0;
}
