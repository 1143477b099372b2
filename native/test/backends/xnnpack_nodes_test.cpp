// Node types one by one (or a few per graph) against references computed
// here: elementwise, pooling, padding, resize, the convolution family, and
// the quantized paths the linked XNNPACK runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend_test_support.h"
#include "backends/xnnpack/node_types.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;
using Params = PayloadBuilder::ConvParams;

std::vector<float> map(const std::vector<float>& x, float (*fn)(float)) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = fn(x[i]);
  return out;
}

TEST(XnnpackNodes, BroadcastBinaryOps) {
  PayloadBuilder b;
  const uint32_t x = b.input({2, 3}, 0), c = b.input({3}, 1);
  const uint32_t sub = b.output({2, 3}, 2), div = b.output({2, 3}, 3), mn = b.output({2, 3}, 4),
                 mx = b.output({2, 3}, 5);
  b.binary(NodeUnion::XNNSubtract, x, c, sub, std::make_pair(-0.5f, 0.5f));
  b.binary(NodeUnion::XNNDiv, x, c, div);
  b.binary(NodeUnion::XNNMinimum, x, c, mn);
  b.binary(NodeUnion::XNNMaximum, x, c, mx);
  const auto xv = pseudo_random(6, 1, 2.0f);
  const std::vector<float> cv = {0.5f, -1.5f, 2.5f};
  auto r = run_graph(b, {{{2, 3}, xv}, {{3}, cv}}, {{{2, 3}}, {{2, 3}}, {{2, 3}}, {{2, 3}}});
  ASSERT_EQ(r.size(), 4u);
  std::vector<float> e_sub(6), e_div(6), e_min(6), e_max(6);
  for (size_t i = 0; i < 6; ++i) {
    const float a = xv[i], d = cv[i % 3];
    e_sub[i] = std::min(0.5f, std::max(-0.5f, a - d));
    e_div[i] = a / d;
    e_min[i] = std::min(a, d);
    e_max[i] = std::max(a, d);
  }
  EXPECT_TRUE(close_to(r[0], e_sub));
  EXPECT_TRUE(close_to(r[1], e_div));
  EXPECT_TRUE(close_to(r[2], e_min));
  EXPECT_TRUE(close_to(r[3], e_max));
}

TEST(XnnpackNodes, UnaryOps) {
  PayloadBuilder b;
  const uint32_t x = b.input({3, 4}, 0), p = b.input({3, 4}, 1);
  std::vector<uint32_t> outs;
  for (uint32_t i = 0; i < 12; ++i) outs.push_back(b.output({3, 4}, 2 + i));
  b.node(NodeUnion::XNNClamp, fbx::CreateUnary(b.fbb(), x, outs[0], 0).Union(), std::make_pair(-0.5f, 0.5f));
  b.unary(NodeUnion::XNNHardswish, x, outs[1]);
  b.unary(NodeUnion::XNNFloor, x, outs[2]);
  b.unary(NodeUnion::XNNCeiling, x, outs[3]);
  b.unary(NodeUnion::XNNSquareRoot, p, outs[4]);
  b.unary(NodeUnion::XNNSquare, x, outs[5]);
  b.unary(NodeUnion::XNNNegate, x, outs[6]);
  b.unary(NodeUnion::XNNAbs, x, outs[7]);
  b.unary(NodeUnion::XNNSigmoid, x, outs[8]);
  b.unary(NodeUnion::XNNSoftmax, x, outs[9]);
  b.node(NodeUnion::XNNELU, fbx::CreateElu(b.fbb(), 0.7f, x, outs[10], 0).Union());
  b.node(NodeUnion::XNNLeakyReLU, fbx::CreateLeakyRelu(b.fbb(), 0.1f, x, outs[11], 0).Union());
  const auto xv = pseudo_random(12, 2, 4.0f);
  auto pv = pseudo_random(12, 3, 4.0f);
  for (float& v : pv) v = std::fabs(v);
  std::vector<Io> out_io(12, Io{{3, 4}});
  auto r = run_graph(b, {{{3, 4}, xv}, {{3, 4}, pv}}, out_io);
  ASSERT_EQ(r.size(), 12u);
  EXPECT_TRUE(close_to(r[0], map(xv, [](float v) { return std::min(0.5f, std::max(-0.5f, v)); })));
  EXPECT_TRUE(close_to(r[1], map(xv, [](float v) { return v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f; })));
  EXPECT_TRUE(close_to(r[2], map(xv, [](float v) { return std::floor(v); })));
  EXPECT_TRUE(close_to(r[3], map(xv, [](float v) { return std::ceil(v); })));
  EXPECT_TRUE(close_to(r[4], map(pv, [](float v) { return std::sqrt(v); })));
  EXPECT_TRUE(close_to(r[5], map(xv, [](float v) { return v * v; })));
  EXPECT_TRUE(close_to(r[6], map(xv, [](float v) { return -v; })));
  EXPECT_TRUE(close_to(r[7], map(xv, [](float v) { return std::fabs(v); })));
  EXPECT_TRUE(close_to(r[8], map(xv, [](float v) { return 1.0f / (1.0f + std::exp(-v)); })));
  std::vector<float> softmax(12);
  for (size_t row = 0; row < 3; ++row) {
    double sum = 0;
    for (size_t i = 0; i < 4; ++i) sum += std::exp(double(xv[row * 4 + i]));
    for (size_t i = 0; i < 4; ++i) softmax[row * 4 + i] = static_cast<float>(std::exp(double(xv[row * 4 + i])) / sum);
  }
  EXPECT_TRUE(close_to(r[9], softmax));
  EXPECT_TRUE(close_to(r[10], map(xv, [](float v) { return v > 0 ? v : 0.7f * (std::exp(v) - 1.0f); })));
  EXPECT_TRUE(close_to(r[11], map(xv, [](float v) { return v >= 0 ? v : 0.1f * v; })));
}

TEST(XnnpackNodes, PReluPerChannelAndBroadcastSlope) {
  PayloadBuilder b;
  const std::vector<float> slopes = {0.1f, -0.5f, 2.0f}, single = {0.25f};
  const uint32_t x = b.input({2, 2, 3}, 0);
  const uint32_t s3 = b.constant({3}, slopes), s1 = b.constant({1}, single);
  const uint32_t y3 = b.output({2, 2, 3}, 1), y1 = b.output({2, 2, 3}, 2);
  b.binary(NodeUnion::XNNPReLU, x, s3, y3);
  b.binary(NodeUnion::XNNPReLU, x, s1, y1);
  const auto xv = pseudo_random(12, 4, 3.0f);
  auto r = run_graph(b, {{{2, 2, 3}, xv}}, {{{2, 2, 3}}, {{2, 2, 3}}});
  ASSERT_EQ(r.size(), 2u);
  std::vector<float> e3(12), e1(12);
  for (size_t i = 0; i < 12; ++i) {
    e3[i] = xv[i] >= 0 ? xv[i] : xv[i] * slopes[i % 3];
    e1[i] = xv[i] >= 0 ? xv[i] : xv[i] * single[0];
  }
  EXPECT_TRUE(close_to(r[0], e3));
  EXPECT_TRUE(close_to(r[1], e1));
}

// ONNX's PRelu bit for bit, on etna's kernel for every slope: -0 is not
// below 0, so it stays -0 under any slope (XNNPACK's kernel multiplies it by
// the slope); NaN stays NaN; -inf times a slope of 0 is NaN; a subnormal
// input or product is kept (XNNPACK's kernels run with them flushed to 0).
TEST(XnnpackNodes, PReluKeepsNegativeZeroForEverySlope) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<std::vector<float>> slope_sets = {
      {0.1f, 0.0f, 2.0f, 0.5f}, {0.1f, -0.5f, 2.0f, 0.5f}, {-0.0f, 1.0f, 1.0f, 1.0f}, {inf, 0.5f, nan, 0.0f}, {-0.25f}};
  const std::vector<float> xv = {-0.0f, 0.0f, -1.5f, 2.0f, nan, -inf, inf, -3.0f, -0.0f, -4 * tiny, -1e-38f, -2.0f};
  for (const auto& slopes : slope_sets) {
    auto build = [&](PayloadBuilder& b) {
      const uint32_t x = b.input({3, 4}, 0);
      const uint32_t s = b.constant({static_cast<uint32_t>(slopes.size())}, slopes);
      b.binary(NodeUnion::XNNPReLU, x, s, b.output({3, 4}, 1));
    };
    PayloadBuilder inspected;
    build(inspected);
    const auto payload = inspected.finish(Layout::kConstantRegion, 2);
    auto parsed = xnn::parse_payload(ByteSpan{payload.data(), payload.size()}, inspected.lookup());
    ASSERT_TRUE(parsed);
    EXPECT_EQ(xnn::engine_for(parsed->graph, parsed->graph.nodes[0]), xnn::Engine::kEtnaKernel);

    PayloadBuilder b;
    build(b);
    auto r = run_graph(b, {{{3, 4}, xv}}, {{{3, 4}}});
    ASSERT_EQ(r.size(), 1u);
    for (size_t i = 0; i < xv.size(); ++i) {
      const float slope = slopes.size() == 1 ? slopes[0] : slopes[i % 4];
      const float expected = xv[i] < 0.0f ? xv[i] * slope : xv[i];
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(r[0][i])) << "element " << i;
      } else {
        EXPECT_EQ(r[0][i], expected) << "element " << i;
        EXPECT_EQ(std::signbit(r[0][i]), std::signbit(expected)) << "element " << i;
      }
    }
  }
}

// A slope broadcast against the input from its last dim, along any dims (how
// the ONNX importer writes PRelu whose slopes are not one per element of the
// last dim), bit for bit ONNX's x < 0 ? x * slope : x, with -0, NaN,
// infinities and subnormals among the inputs.
TEST(XnnpackNodes, PReluSlopeBroadcastAlongAnyDims) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<int64_t> sizes = {2, 3, 4, 5};
  const std::vector<std::vector<uint32_t>> slope_dims = {{3, 1, 1},    {4, 1},    {3, 1, 5},    {3, 4, 5}, {2, 1, 1, 1},
                                                         {1, 3, 1, 1}, {1, 1, 1}, {2, 3, 4, 5}, {1, 5},    {1, 1, 5}};
  std::vector<float> xv = pseudo_random(120, 9, 3.0f);
  const float specials[] = {-0.0f, 0.0f, nan, -inf, inf, -3 * std::numeric_limits<float>::denorm_min(), -1e-38f, -0.0f};
  for (size_t i = 0; i < 120; i += 15) xv[i] = specials[i / 15];
  for (const auto& dims : slope_dims) {
    size_t count = 1;
    for (uint32_t d : dims) count *= d;
    for (bool negative : {false, true}) {
      std::string label = "slope";
      for (uint32_t d : dims) label += " " + std::to_string(d);
      SCOPED_TRACE(label + (negative ? ", some negative" : ", positive"));
      std::vector<float> slopes = pseudo_random(count, static_cast<uint32_t>(count + 3), 1.0f);
      for (size_t k = 0; k < count; ++k) slopes[k] = std::fabs(slopes[k]) * ((negative && k % 2 == 0) ? -1.0f : 1.0f);
      PayloadBuilder b;
      const uint32_t x = b.input({2, 3, 4, 5}, 0);
      b.binary(NodeUnion::XNNPReLU, x, b.constant(dims, slopes), b.output({2, 3, 4, 5}, 1));
      auto r = run_graph(b, {{sizes, xv}}, {{sizes}});
      ASSERT_EQ(r.size(), 1u);
      for (size_t i = 0; i < 120; ++i) {
        // The slope element of x's element i: its index along each slope dim, right-aligned.
        size_t rest = i, at = 0, step = 1;
        for (size_t d = 0; d < 4; ++d) {
          const size_t size = static_cast<size_t>(sizes[3 - d]), index = rest % size;
          rest /= size;
          if (d < dims.size() && dims[dims.size() - 1 - d] != 1) at += index * step;
          if (d < dims.size()) step *= dims[dims.size() - 1 - d];
        }
        const float expected = xv[i] < 0.0f ? xv[i] * slopes[at] : xv[i];
        uint32_t want, got;
        std::memcpy(&want, &expected, 4);
        std::memcpy(&got, &r[0][i], 4);
        EXPECT_EQ(got, want) << "element " << i << " (x = " << xv[i] << ")";
      }
    }
  }
}

// A slope that does not broadcast to the input is refused when the delegate
// is made, naming both shapes.
TEST(XnnpackNodes, PReluRefusesASlopeThatDoesNotBroadcast) {
  for (const std::vector<uint32_t>& dims : std::vector<std::vector<uint32_t>>{{4}, {3, 2}, {2, 2, 3, 4, 5}}) {
    size_t count = 1;
    for (uint32_t d : dims) count *= d;
    PayloadBuilder b;
    const uint32_t x = b.input({2, 3, 4, 5}, 0);
    b.binary(NodeUnion::XNNPReLU, x, b.constant(dims, std::vector<float>(count, 0.5f)), b.output({2, 3, 4, 5}, 1));
    const auto payload = b.finish(Layout::kConstantRegion, 2);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context, b.lookup());
    ASSERT_FALSE(delegate);
    EXPECT_NE(delegate.error().message.find("does not broadcast to"), std::string::npos) << delegate.error().message;
  }
}

// Every permutation of a 4-D tensor whose dims are not multiples of the
// transpose kernel's tile, against index arithmetic done here.
TEST(XnnpackNodes, TransposeEveryPermutation) {
  const std::vector<size_t> dims = {3, 5, 17, 19};
  const size_t count = 3 * 5 * 17 * 19;
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i);
  std::vector<uint32_t> perm = {0, 1, 2, 3};
  do {
    PayloadBuilder b;
    std::vector<uint32_t> out_dims;
    for (uint32_t p : perm) out_dims.push_back(static_cast<uint32_t>(dims[p]));
    const uint32_t in = b.input({3, 5, 17, 19}, 0);
    const uint32_t out = b.output(out_dims, 1);
    b.transpose(perm, in, out);
    auto r = run_graph(b, {{{3, 5, 17, 19}, x}}, {{std::vector<int64_t>(out_dims.begin(), out_dims.end())}});
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].size(), count);
    // Walk the output in order; the input index follows from the permutation.
    const size_t in_strides[4] = {5 * 17 * 19, 17 * 19, 19, 1};
    size_t index[4] = {};
    bool same = true;
    for (size_t k = 0; k < count && same; ++k) {
      size_t source = 0;
      for (size_t d = 0; d < 4; ++d) source += index[d] * in_strides[perm[d]];
      same = r[0][k] == x[source];
      for (size_t d = 4; d-- > 0;) {
        if (++index[d] < static_cast<size_t>(out_dims[d])) break;
        index[d] = 0;
      }
    }
    EXPECT_TRUE(same) << "perm " << perm[0] << perm[1] << perm[2] << perm[3];
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(XnnpackNodes, ConstantPadAndBilinearResize) {
  PayloadBuilder b;
  const uint32_t x = b.input({2, 3}, 0), img = b.input({1, 2, 2, 1}, 1);
  const uint32_t padded = b.output({3, 5}, 2), resized = b.output({1, 3, 3, 1}, 3);
  auto pre = b.fbb().CreateVector(std::vector<uint32_t>{1, 0});
  auto post = b.fbb().CreateVector(std::vector<uint32_t>{0, 2});
  b.node(NodeUnion::XNNStaticConstantPad, fbx::CreateStaticConstantPad(b.fbb(), pre, post, 7.0f, x, padded, 0).Union());
  b.node(NodeUnion::XNNStaticResizeBilinear2D,
         fbx::CreateStaticResizeBilinear2d(b.fbb(), 3, 3, img, resized, 0x8 /* align corners */).Union());
  const std::vector<float> xv = {1, 2, 3, 4, 5, 6}, iv = {0, 2, 4, 8};
  auto r = run_graph(b, {{{2, 3}, xv}, {{1, 2, 2, 1}, iv}}, {{{3, 5}}, {{1, 3, 3, 1}}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(close_to(r[0], {7, 7, 7, 7, 7, 1, 2, 3, 7, 7, 4, 5, 6, 7, 7}));
  EXPECT_TRUE(close_to(r[1], {0, 1, 2, 2, 3.5f, 5, 4, 6, 8}));
}

TEST(XnnpackNodes, Poolings) {
  PayloadBuilder b;
  const uint32_t x = b.input({1, 4, 4, 2}, 0);
  const uint32_t maxp = b.output({1, 2, 2, 2}, 1), avgp = b.output({1, 4, 4, 2}, 2), gap = b.output({1, 1, 1, 2}, 3);
  const uint32_t amax = b.output({1, 2, 2, 2}, 4), aidx = b.output({1, 2, 2, 2}, 5);
  b.pooling(NodeUnion::XNNMaxPooling2d, 0, 2, 2, x, maxp);
  b.pooling(NodeUnion::XNNAvgPooling2d, 1, 3, 1, x, avgp);
  b.unary(NodeUnion::XNNGlobalAvgPooling2d, x, gap);
  b.node(NodeUnion::XNNArgMaxPooling2d,
         fbx::CreateArgMaxPooling2d(b.fbb(), 0, 0, 0, 0, 2, 2, x, amax, aidx, 0).Union());
  const auto xv = pseudo_random(32, 5, 3.0f);
  auto at = [&](size_t y, size_t xx, size_t c) { return xv[(y * 4 + xx) * 2 + c]; };
  Io index_io{{1, 2, 2, 2}, {}, ScalarType::kLong};
  auto r =
      run_graph(b, {{{1, 4, 4, 2}, xv}}, {{{1, 2, 2, 2}}, {{1, 4, 4, 2}}, {{1, 1, 1, 2}}, {{1, 2, 2, 2}}, index_io});
  ASSERT_EQ(r.size(), 5u);
  std::vector<float> e_max(8), e_idx(8), e_avg(32), e_gap(2, 0.0f);
  for (size_t oy = 0; oy < 2; ++oy) {
    for (size_t ox = 0; ox < 2; ++ox) {
      for (size_t c = 0; c < 2; ++c) {
        float best = -INFINITY;
        size_t best_index = 0;
        // XNNPACK numbers window positions column by column: index = kx * height + ky.
        for (size_t k = 0; k < 4; ++k) {
          const float v = at(oy * 2 + k % 2, ox * 2 + k / 2, c);
          if (v > best) {
            best = v;
            best_index = k;
          }
        }
        e_max[(oy * 2 + ox) * 2 + c] = best;
        e_idx[(oy * 2 + ox) * 2 + c] = static_cast<float>(best_index);
      }
    }
  }
  for (size_t y = 0; y < 4; ++y) {
    for (size_t xx = 0; xx < 4; ++xx) {
      for (size_t c = 0; c < 2; ++c) {
        double sum = 0;
        int count = 0;
        for (int dy = -1; dy <= 1; ++dy) {
          for (int dx = -1; dx <= 1; ++dx) {
            const int iy = int(y) + dy, ix = int(xx) + dx;
            if (iy < 0 || ix < 0 || iy >= 4 || ix >= 4) continue;
            sum += at(iy, ix, c);
            ++count;
          }
        }
        e_avg[(y * 4 + xx) * 2 + c] = static_cast<float>(sum / count);
        e_gap[c] += at(y, xx, c) / 16.0f;
      }
    }
  }
  EXPECT_TRUE(close_to(r[0], e_max));
  EXPECT_TRUE(close_to(r[1], e_avg));
  EXPECT_TRUE(close_to(r[2], e_gap));
  EXPECT_TRUE(close_to(r[3], e_max));
  EXPECT_TRUE(close_to(r[4], e_idx));
}

// NHWC reference for grouped/dilated/strided convolution; filter OHWI.
std::vector<float> conv_reference(const std::vector<float>& in, size_t h, size_t w, const std::vector<float>& filter,
                                  const std::vector<float>& bias, const Params& p, size_t oh, size_t ow, float lo,
                                  float hi) {
  const size_t cin = p.groups * p.group_in, cout = p.groups * p.group_out;
  std::vector<float> out(oh * ow * cout);
  for (size_t oy = 0; oy < oh; ++oy) {
    for (size_t ox = 0; ox < ow; ++ox) {
      for (size_t oc = 0; oc < cout; ++oc) {
        const size_t g = oc / p.group_out;
        double sum = bias[oc];
        for (size_t ky = 0; ky < p.kernel_h; ++ky) {
          for (size_t kx = 0; kx < p.kernel_w; ++kx) {
            const long iy = long(oy * p.stride_h + ky * p.dilation_h) - long(p.pad_top);
            const long ix = long(ox * p.stride_w + kx * p.dilation_w) - long(p.pad_left);
            if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
            for (size_t i = 0; i < p.group_in; ++i) {
              sum += double(in[(iy * w + ix) * cin + g * p.group_in + i]) *
                     filter[((oc * p.kernel_h + ky) * p.kernel_w + kx) * p.group_in + i];
            }
          }
        }
        out[(oy * ow + ox) * cout + oc] = std::min(hi, std::max(lo, static_cast<float>(sum)));
      }
    }
  }
  return out;
}

// One fp32 node of the convolution family over an input of `in_dims`, its
// filter and bias constants, run on `input`: the node's output.
std::vector<float> run_convolution(NodeUnion type, const Params& p, const std::vector<uint32_t>& in_dims,
                                   const std::vector<float>& input, const std::vector<uint32_t>& filter_dims,
                                   const std::vector<float>& filter, const std::vector<float>& bias,
                                   const std::vector<uint32_t>& out_dims,
                                   std::optional<std::pair<float, float>> bounds = {}) {
  PayloadBuilder b;
  const uint32_t x = b.input(in_dims, 0);
  const uint32_t f = b.constant(filter_dims, filter);
  const uint32_t bb = b.constant({static_cast<uint32_t>(bias.size())}, bias);
  const uint32_t y = b.output(out_dims, 1);
  b.convolution(type, p, x, f, bb, y, bounds);
  auto r = run_graph(b, {{std::vector<int64_t>(in_dims.begin(), in_dims.end()), input}},
                     {{std::vector<int64_t>(out_dims.begin(), out_dims.end())}});
  EXPECT_EQ(r.size(), 1u);
  return r.empty() ? std::vector<float>{} : r[0];
}

TEST(XnnpackNodes, GroupedStridedConvolutionWithBounds) {
  Params p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.group_in = 2;
  p.group_out = 3;
  p.groups = 2;
  const auto filter = pseudo_random(6 * 3 * 3 * 2, 6), bias = pseudo_random(6, 7);
  const auto xv = pseudo_random(100, 8);
  const auto out = run_convolution(NodeUnion::XNNConv2d, p, {1, 5, 5, 4}, xv, {6, 3, 3, 2}, filter, bias, {1, 3, 3, 6},
                                   std::make_pair(-1.0f, 1.0f));
  EXPECT_TRUE(close_to(out, conv_reference(xv, 5, 5, filter, bias, p, 3, 3, -1.0f, 1.0f)));
}

TEST(XnnpackNodes, DilatedConvolution) {
  Params p;
  p.kernel_h = p.kernel_w = 2;
  p.dilation_h = p.dilation_w = 2;
  p.group_in = 3;
  p.group_out = 2;
  const auto filter = pseudo_random(2 * 2 * 2 * 3, 9), bias = pseudo_random(2, 10);
  const auto xv = pseudo_random(60, 11);
  const auto out = run_convolution(NodeUnion::XNNConv2d, p, {1, 4, 5, 3}, xv, {2, 2, 2, 3}, filter, bias, {1, 2, 3, 2});
  EXPECT_TRUE(close_to(out, conv_reference(xv, 4, 5, filter, bias, p, 2, 3, -INFINITY, INFINITY)));
}

TEST(XnnpackNodes, DepthwiseConvolution) {
  Params p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.kernel_h = p.kernel_w = 3;
  p.group_in = 1;
  p.group_out = 2;  // depth multiplier
  p.groups = 3;     // input channels
  const auto filter = pseudo_random(3 * 3 * 6, 12), bias = pseudo_random(6, 13);
  const auto xv = pseudo_random(48, 14);
  const auto out =
      run_convolution(NodeUnion::XNNDepthwiseConv2d, p, {1, 4, 4, 3}, xv, {1, 3, 3, 6}, filter, bias, {1, 4, 4, 6});
  std::vector<float> expected(4 * 4 * 6);
  for (size_t oy = 0; oy < 4; ++oy) {
    for (size_t ox = 0; ox < 4; ++ox) {
      for (size_t oc = 0; oc < 6; ++oc) {
        double sum = bias[oc];
        for (size_t ky = 0; ky < 3; ++ky) {
          for (size_t kx = 0; kx < 3; ++kx) {
            const long iy = long(oy + ky) - 1, ix = long(ox + kx) - 1;
            if (iy < 0 || ix < 0 || iy >= 4 || ix >= 4) continue;
            sum += double(xv[(iy * 4 + ix) * 3 + oc / 2]) * filter[(ky * 3 + kx) * 6 + oc];
          }
        }
        expected[(oy * 4 + ox) * 6 + oc] = static_cast<float>(sum);
      }
    }
  }
  EXPECT_TRUE(close_to(out, expected));
}

TEST(XnnpackNodes, TransposedConvolution) {
  Params p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.kernel_h = p.kernel_w = 3;
  p.stride_h = p.stride_w = 2;
  p.adjust_h = p.adjust_w = 1;
  p.group_in = 2;
  p.group_out = 4;
  const auto filter = pseudo_random(4 * 3 * 3 * 2, 15), bias = pseudo_random(4, 16);
  const auto xv = pseudo_random(18, 17);
  const auto out =
      run_convolution(NodeUnion::XNNConvTranspose2d, p, {1, 3, 3, 2}, xv, {4, 3, 3, 2}, filter, bias, {1, 6, 6, 4});
  std::vector<double> acc(6 * 6 * 4, 0.0);
  for (size_t oy = 0; oy < 6; ++oy) {
    for (size_t ox = 0; ox < 6; ++ox) {
      for (size_t oc = 0; oc < 4; ++oc) acc[(oy * 6 + ox) * 4 + oc] = bias[oc];
    }
  }
  for (size_t iy = 0; iy < 3; ++iy) {
    for (size_t ix = 0; ix < 3; ++ix) {
      for (size_t ky = 0; ky < 3; ++ky) {
        for (size_t kx = 0; kx < 3; ++kx) {
          const long oy = long(iy * 2 + ky) - 1, ox = long(ix * 2 + kx) - 1;
          if (oy < 0 || ox < 0 || oy >= 6 || ox >= 6) continue;
          for (size_t oc = 0; oc < 4; ++oc) {
            for (size_t ic = 0; ic < 2; ++ic) {
              acc[(oy * 6 + ox) * 4 + oc] +=
                  double(xv[(iy * 3 + ix) * 2 + ic]) * filter[((oc * 3 + ky) * 3 + kx) * 2 + ic];
            }
          }
        }
      }
    }
  }
  EXPECT_TRUE(close_to(out, std::vector<float>(acc.begin(), acc.end())));
}

// ---- quantized ----

int8_t quantize(float v, float scale, int zero_point) {
  const float q = std::nearbyint(v / scale) + float(zero_point);
  return static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, q)));
}

std::vector<uint8_t> bytes_of(const std::vector<int8_t>& v) { return std::vector<uint8_t>(v.begin(), v.end()); }
std::vector<uint8_t> bytes_of(const std::vector<int32_t>& v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(XnnpackNodes, QuantizedAddBetweenConverts) {
  const float in_scale = 0.05f, out_scale = 0.1f;
  const int in_zero = 3, out_zero = -2;
  PayloadBuilder b;
  const uint32_t x = b.input({8}, 0), y = b.input({8}, 1);
  const uint32_t xq = b.quantized(fbx::Datatype::qint8, {8}, in_scale, in_zero);
  const uint32_t yq = b.quantized(fbx::Datatype::qint8, {8}, in_scale, in_zero);
  const uint32_t sq = b.quantized(fbx::Datatype::qint8, {8}, out_scale, out_zero);
  const uint32_t out = b.output({8}, 2);
  b.unary(NodeUnion::XNNConvert, x, xq);
  b.unary(NodeUnion::XNNConvert, y, yq);
  b.binary(NodeUnion::XNNAdd, xq, yq, sq);
  b.unary(NodeUnion::XNNConvert, sq, out);
  const auto xv = pseudo_random(8, 18, 3.0f), yv = pseudo_random(8, 19, 3.0f);
  auto r = run_graph(b, {{{8}, xv}, {{8}, yv}}, {{{8}}});
  ASSERT_EQ(r.size(), 1u);
  for (size_t i = 0; i < 8; ++i) {
    const float a = (quantize(xv[i], in_scale, in_zero) - in_zero) * in_scale;
    const float c = (quantize(yv[i], in_scale, in_zero) - in_zero) * in_scale;
    const float expected = (quantize(a + c, out_scale, out_zero) - out_zero) * out_scale;
    EXPECT_NEAR(r[0][i], expected, out_scale * 1.01f) << "element " << i;
  }
}

// FC over int8 with a per-tensor or a per-channel filter (the latter runs as
// a 1x1 convolution), converted from and to fp32 around it.
void quantized_fully_connected(bool per_channel) {
  const float x_scale = 0.02f, out_scale = 0.05f;
  const int x_zero = 1, out_zero = -3;
  const std::vector<float> w_scales =
      per_channel ? std::vector<float>{0.01f, 0.02f, 0.005f, 0.015f} : std::vector<float>{0.01f, 0.01f, 0.01f, 0.01f};
  std::vector<int8_t> wq(4 * 8);
  const auto wf = pseudo_random(32, 20, 1.0f);
  for (size_t i = 0; i < 32; ++i) wq[i] = static_cast<int8_t>(std::nearbyint(wf[i] * 100.0f));
  std::vector<int32_t> bq = {100, -250, 37, 0};

  PayloadBuilder b;
  const uint32_t x = b.input({2, 8}, 0);
  const uint32_t xq = b.quantized(fbx::Datatype::qint8, {2, 8}, x_scale, x_zero);
  uint32_t w = 0, bias = 0;
  if (per_channel) {
    std::vector<float> bias_scales;
    for (float s : w_scales) bias_scales.push_back(s * x_scale);
    w = b.channelwise(fbx::Datatype::qcint8, {4, 8}, w_scales, 0, bytes_of(wq));
    bias = b.channelwise(fbx::Datatype::qcint32, {4}, bias_scales, 0, bytes_of(bq));
  } else {
    const auto wbytes = bytes_of(wq), bbytes = bytes_of(bq);
    w = b.quantized(fbx::Datatype::qint8, {4, 8}, w_scales[0], 0, PayloadBuilder::kNone, 0, &wbytes);
    bias = b.quantized(fbx::Datatype::qint32, {4}, w_scales[0] * x_scale, 0, PayloadBuilder::kNone, 0, &bbytes);
  }
  const uint32_t yq = b.quantized(fbx::Datatype::qint8, {2, 4}, out_scale, out_zero);
  const uint32_t y = b.output({2, 4}, 1);
  b.unary(NodeUnion::XNNConvert, x, xq);
  b.fully_connected(xq, w, bias, yq);
  b.unary(NodeUnion::XNNConvert, yq, y);
  const auto xv = pseudo_random(16, 21, 2.0f);
  auto r = run_graph(b, {{{2, 8}, xv}}, {{{2, 4}}});
  ASSERT_EQ(r.size(), 1u);
  for (size_t row = 0; row < 2; ++row) {
    for (size_t o = 0; o < 4; ++o) {
      int64_t acc = bq[o];
      for (size_t k = 0; k < 8; ++k)
        acc += int64_t(quantize(xv[row * 8 + k], x_scale, x_zero) - x_zero) * wq[o * 8 + k];
      const float real = float(acc) * x_scale * w_scales[o];
      const float expected = (quantize(real, out_scale, out_zero) - out_zero) * out_scale;
      EXPECT_NEAR(r[0][row * 4 + o], expected, out_scale * 1.01f) << "row " << row << " channel " << o;
    }
  }
}

TEST(XnnpackNodes, QuantizedFullyConnectedPerTensor) { quantized_fully_connected(false); }
TEST(XnnpackNodes, QuantizedFullyConnectedPerChannel) { quantized_fully_connected(true); }

TEST(XnnpackNodes, QuantizedPerChannelConvolution) {
  const float x_scale = 0.03f, out_scale = 0.04f;
  const int x_zero = -5, out_zero = 2;
  const std::vector<float> w_scales = {0.01f, 0.02f, 0.03f};
  std::vector<int8_t> wq(3 * 2 * 2 * 2);
  const auto wf = pseudo_random(wq.size(), 22, 1.0f);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>(std::nearbyint(wf[i] * 120.0f));
  const std::vector<int32_t> bq = {10, -20, 30};
  std::vector<float> bias_scales;
  for (float s : w_scales) bias_scales.push_back(s * x_scale);

  Params p;
  p.kernel_h = p.kernel_w = 2;
  p.group_in = 2;
  p.group_out = 3;
  PayloadBuilder b;
  const uint32_t x = b.input({1, 3, 3, 2}, 0);
  const uint32_t xq = b.quantized(fbx::Datatype::qint8, {1, 3, 3, 2}, x_scale, x_zero);
  const uint32_t w = b.channelwise(fbx::Datatype::qcint8, {3, 2, 2, 2}, w_scales, 0, bytes_of(wq));
  const uint32_t bias = b.channelwise(fbx::Datatype::qcint32, {3}, bias_scales, 0, bytes_of(bq));
  const uint32_t yq = b.quantized(fbx::Datatype::qint8, {1, 2, 2, 3}, out_scale, out_zero);
  const uint32_t y = b.output({1, 2, 2, 3}, 1);
  b.unary(NodeUnion::XNNConvert, x, xq);
  b.convolution(NodeUnion::XNNConv2d, p, xq, w, bias, yq);
  b.unary(NodeUnion::XNNConvert, yq, y);
  const auto xv = pseudo_random(18, 23, 2.0f);
  auto r = run_graph(b, {{{1, 3, 3, 2}, xv}}, {{{1, 2, 2, 3}}});
  ASSERT_EQ(r.size(), 1u);
  for (size_t oy = 0; oy < 2; ++oy) {
    for (size_t ox = 0; ox < 2; ++ox) {
      for (size_t oc = 0; oc < 3; ++oc) {
        int64_t acc = bq[oc];
        for (size_t ky = 0; ky < 2; ++ky) {
          for (size_t kx = 0; kx < 2; ++kx) {
            for (size_t ic = 0; ic < 2; ++ic) {
              const int q = quantize(xv[((oy + ky) * 3 + ox + kx) * 2 + ic], x_scale, x_zero) - x_zero;
              acc += int64_t(q) * wq[((oc * 2 + ky) * 2 + kx) * 2 + ic];
            }
          }
        }
        const float expected =
            (quantize(float(acc) * x_scale * w_scales[oc], out_scale, out_zero) - out_zero) * out_scale;
        EXPECT_NEAR(r[0][(oy * 2 + ox) * 3 + oc], expected, out_scale * 1.01f);
      }
    }
  }
}

}  // namespace
}  // namespace etna::test
