// A dynamically quantized 3x3 convolution (qd8-f32-qc8w: int8 activations
// quantized per image at run time, int8 filter per output channel) against
// the fp32 XNNPACK convolution of the same size, both through etna's XNNPACK
// delegate, one thread, same run.
//
//   cmake --build build-native --target etna_dynconv_bench
//   build-native/etna_dynconv_bench [size] [channels] [rounds]    (default 56 64 5)
//
// Prints the median milliseconds per call of fp32, and of qd8 on each vector
// path the CPU has, with their ratios, for 1 x channels x size x size in,
// channels out, padding 1.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "delegate_timing.h"

namespace {

using etna::test::LocalTensor;
using etna::test::PayloadBuilder;
namespace fbx = ::etna::xnnpack;
namespace xnn = ::etna::xnn;

struct Geometry {
  uint32_t size, channels;
  std::vector<uint32_t> image() const { return {1, size, size, channels}; }
  std::vector<uint32_t> filter() const { return {channels, 3, 3, channels}; }
  PayloadBuilder::ConvParams conv() const {
    PayloadBuilder::ConvParams p;
    p.pad_top = p.pad_right = p.pad_bottom = p.pad_left = 1;
    p.kernel_h = p.kernel_w = 3;
    p.group_in = p.group_out = channels;
    return p;
  }
};

std::vector<uint8_t> fp32_conv(const Geometry& g, PayloadBuilder& b) {
  const auto w = etna::test::pseudo_random(size_t(g.channels) * 9 * g.channels, 1, 0.05f);
  const auto bias = etna::test::pseudo_random(g.channels, 2, 0.1f);
  const uint32_t x = b.input(g.image(), 0);
  const uint32_t filter = b.constant(g.filter(), w);
  const uint32_t bias_id = b.constant({g.channels}, bias);
  const uint32_t y = b.output(g.image(), 1);
  b.convolution(fbx::NodeUnion::XNNConv2d, g.conv(), x, filter, bias_id, y);
  return b.finish(PayloadBuilder::Layout::kNamedData, 2);
}

std::vector<uint8_t> qd8_conv(const Geometry& g, PayloadBuilder& b) {
  std::vector<uint8_t> codes(size_t(g.channels) * 9 * g.channels);
  uint32_t state = 7;
  for (uint8_t& byte : codes) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<uint8_t>(state >> 24);
  }
  const std::vector<float> scales(g.channels, 0.0004f);
  const auto bias = etna::test::pseudo_random(g.channels, 2, 0.1f);
  const uint32_t x = b.input(g.image(), 0);
  auto per_image = fbx::CreatePerTokenDynamicQuant(b.fbb(), 3);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, g.image(), fbx::QuantParams::PerTokenDynamicQuant, per_image.Union());
  const uint32_t filter = b.channelwise(fbx::Datatype::qcint8, g.filter(), scales, 0, codes);
  const uint32_t bias_id = b.constant({g.channels}, bias);
  const uint32_t y = b.output(g.image(), 1);
  b.unary(fbx::NodeUnion::XNNConvert, x, q);
  b.convolution(fbx::NodeUnion::XNNConv2d, g.conv(), q, filter, bias_id, y);
  return b.finish(PayloadBuilder::Layout::kNamedData, 2);
}

double time_delegate(const std::vector<uint8_t>& payload, const PayloadBuilder& b, const Geometry& g, int rounds) {
  const std::vector<int64_t> sizes = {1, g.size, g.size, g.channels};
  LocalTensor input(etna::ScalarType::kFloat, sizes);
  input.fill(etna::test::pseudo_random(size_t(g.size) * g.size * g.channels, 3, 1.0f));
  LocalTensor output(etna::ScalarType::kFloat, sizes);
  return etna::bench::median_ms_per_call(payload, b, input, output, 5, rounds);
}

}  // namespace

int main(int argc, char** argv) {
  const Geometry g{argc > 1 ? uint32_t(std::strtoul(argv[1], nullptr, 10)) : 56u,
                   argc > 2 ? uint32_t(std::strtoul(argv[2], nullptr, 10)) : 64u};
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  std::printf("best dot-product path on this CPU: %s\n", xnn::dot_path_name(xnn::active_dot_path()));
  PayloadBuilder fp32_builder, qd8_builder;
  const auto fp32 = fp32_conv(g, fp32_builder);
  const auto qd8 = qd8_conv(g, qd8_builder);
  const double fp32_ms = time_delegate(fp32, fp32_builder, g, rounds);
  std::printf("1x%ux%ux%u, 3x3, %u -> %u: fp32 %.3f ms\n", g.channels, g.size, g.size, g.channels, g.channels, fp32_ms);
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    xnn::force_dot_path(path);
    const double qd8_ms = time_delegate(qd8, qd8_builder, g, rounds);
    xnn::clear_forced_dot_path();
    std::printf("  qd8-f32-qc8w on %s: %.3f ms, qd8/fp32 %.2f\n", xnn::dot_path_name(path), qd8_ms, qd8_ms / fp32_ms);
  }
  return 0;
}
