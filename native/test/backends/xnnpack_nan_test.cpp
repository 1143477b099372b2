// NaN, infinities and -0 through every fp32 node type the delegate runs, as
// IEEE arithmetic (and PyTorch, onnxruntime and the portable kernels) give
// them. The linked XNNPACK clamps with max/min instructions that turn NaN
// into the lower bound even when the bounds are infinite (NaN + 1 came out
// -Infinity, relu(NaN) 0); these tests hold the delegate to the IEEE result.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend_test_support.h"
#include "backends/xnnpack/nan_keeping_kernels.h"

namespace etna::test {
namespace {

using fbx::NodeUnion;
using Params = PayloadBuilder::ConvParams;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
const std::pair<float, float> kUnbounded{-kInf, kInf};
const std::pair<float, float> kRelu{0.0f, kInf};

// NHWC [1, 2, 2, 2]: NaN, the infinities, -0 and ordinary values.
const std::vector<float> kSpecials = {kNaN, -kInf, kInf, 2.0f, -0.0f, -3.0f, 0.5f, 1.0f};

// NaN where expected is NaN, the same infinities, zeros of the same sign,
// finite values within `tolerance` (relative above 1).
::testing::AssertionResult same_ieee(const std::vector<float>& actual, const std::vector<float>& expected,
                                     float tolerance = 1e-5f) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const float a = actual[i], e = expected[i];
    bool same;
    if (std::isnan(e)) {
      same = std::isnan(a);
    } else if (std::isinf(e) || e == 0.0f) {
      same = a == e && std::signbit(a) == std::signbit(e);
    } else {
      same = std::fabs(a - e) <= tolerance * std::max(1.0f, std::fabs(e));
    }
    if (!same) return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs expected " << e;
  }
  return ::testing::AssertionSuccess();
}

template <typename Fn>
std::vector<float> elementwise(const std::vector<float>& x, const std::vector<float>& y, Fn fn) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = fn(x[i], y[i % y.size()]);
  return out;
}

float relu(float v) { return v < 0.0f ? 0.0f : v; }  // the portable relu: NaN and -0 stay

TEST(XnnpackNaN, BinaryArithmeticKeepsNaN) {
  struct Op {
    NodeUnion type;
    float (*fn)(float, float);
  };
  const Op ops[] = {
      {NodeUnion::XNNAdd, [](float a, float b) { return a + b; }},
      {NodeUnion::XNNSubtract, [](float a, float b) { return a - b; }},
      {NodeUnion::XNNMultiply, [](float a, float b) { return a * b; }},
      {NodeUnion::XNNDiv, [](float a, float b) { return a / b; }},
  };
  // Same shapes, and a per-channel operand broadcast over the image.
  const std::vector<float> same = {1.0f, 1.0f, -1.0f, 0.0f, -0.0f, 2.0f, -kInf, kNaN};
  const std::vector<float> channel = {1.0f, -0.0f};
  for (const Op& op : ops) {
    SCOPED_TRACE(fbx::EnumNameNodeUnion(op.type));
    PayloadBuilder b;
    const uint32_t x = b.input({1, 2, 2, 2}, 0), y = b.input({1, 2, 2, 2}, 1), c = b.input({2}, 2);
    const uint32_t plain = b.output({1, 2, 2, 2}, 3), fused = b.output({1, 2, 2, 2}, 4);
    const uint32_t broadcast = b.output({1, 2, 2, 2}, 5);
    b.binary(op.type, x, y, plain, kUnbounded);
    b.binary(op.type, x, y, fused, kRelu);
    b.binary(op.type, x, c, broadcast);
    auto r = run_graph(b, {{{1, 2, 2, 2}, kSpecials}, {{1, 2, 2, 2}, same}, {{2}, channel}},
                       {{{1, 2, 2, 2}}, {{1, 2, 2, 2}}, {{1, 2, 2, 2}}});
    ASSERT_EQ(r.size(), 3u);
    const auto expected = elementwise(kSpecials, same, op.fn);
    EXPECT_TRUE(same_ieee(r[0], expected));
    std::vector<float> clamped(expected.size());
    for (size_t i = 0; i < expected.size(); ++i) clamped[i] = relu(expected[i]);
    EXPECT_TRUE(same_ieee(r[1], clamped));
    EXPECT_TRUE(same_ieee(r[2], elementwise(kSpecials, channel, op.fn)));
  }
}

TEST(XnnpackNaN, MaximumAndMinimumPropagateNaN) {
  PayloadBuilder b;
  const uint32_t x = b.input({1, 2, 2, 2}, 0), y = b.input({2}, 1);
  const uint32_t hi = b.output({1, 2, 2, 2}, 2), lo = b.output({1, 2, 2, 2}, 3);
  b.binary(NodeUnion::XNNMaximum, x, y, hi);
  b.binary(NodeUnion::XNNMinimum, y, x, lo);
  auto r = run_graph(b, {{{1, 2, 2, 2}, kSpecials}, {{2}, {1.0f, kNaN}}}, {{{1, 2, 2, 2}}, {{1, 2, 2, 2}}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(same_ieee(r[0], {kNaN, kNaN, kInf, kNaN, 1.0f, kNaN, 1.0f, kNaN}));
  EXPECT_TRUE(same_ieee(r[1], {kNaN, kNaN, 1.0f, kNaN, -0.0f, kNaN, 0.5f, kNaN}));
}

TEST(XnnpackNaN, ClampAndReluKeepNaN) {
  PayloadBuilder b;
  const uint32_t x = b.input({1, 2, 2, 2}, 0);
  const uint32_t relu_out = b.output({1, 2, 2, 2}, 1), band = b.output({1, 2, 2, 2}, 2);
  const uint32_t open = b.output({1, 2, 2, 2}, 3);
  b.node(NodeUnion::XNNClamp, fbx::CreateUnary(b.fbb(), x, relu_out, 0).Union(), kRelu);
  b.node(NodeUnion::XNNClamp, fbx::CreateUnary(b.fbb(), x, band, 0).Union(), std::make_pair(-1.0f, 1.0f));
  b.node(NodeUnion::XNNClamp, fbx::CreateUnary(b.fbb(), x, open, 0).Union(), kUnbounded);
  auto r = run_graph(b, {{{1, 2, 2, 2}, kSpecials}}, {{{1, 2, 2, 2}}, {{1, 2, 2, 2}}, {{1, 2, 2, 2}}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(same_ieee(r[0], {kNaN, 0.0f, kInf, 2.0f, -0.0f, 0.0f, 0.5f, 1.0f}));
  EXPECT_TRUE(same_ieee(r[1], {kNaN, -1.0f, 1.0f, 1.0f, -0.0f, -1.0f, 0.5f, 1.0f}));
  EXPECT_TRUE(same_ieee(r[2], kSpecials));
}

// softmax(x) = e^(x - max) / sum over the innermost dim, in double.
std::vector<float> softmax_reference(const std::vector<float>& x, size_t len) {
  std::vector<float> out(x.size());
  for (size_t r = 0; r < x.size() / len; ++r) {
    double top = -INFINITY;
    bool nan = false;
    for (size_t i = 0; i < len; ++i) {
      nan = nan || std::isnan(x[r * len + i]);
      top = std::max(top, static_cast<double>(x[r * len + i]));
    }
    double sum = 0;
    std::vector<double> e(len);
    for (size_t i = 0; i < len; ++i) sum += (e[i] = std::exp(x[r * len + i] - top));
    for (size_t i = 0; i < len; ++i) out[r * len + i] = nan ? kNaN : static_cast<float>(e[i] / sum);
  }
  return out;
}

// Sigmoid of infinities and of huge numbers is 0 or 1: on the inputs
// directly, and on infinities a division makes inside from finite inputs
// (the 2022 XNNPACK's own sigmoid gives NaN beyond about 6e26).
TEST(XnnpackNaN, SigmoidOfHugeValuesAndInfinitiesIsZeroOrOne) {
  const float two = 1.0f / (1.0f + std::exp(-2.0f));
  {
    PayloadBuilder b;
    const uint32_t x = b.input({1, 6}, 0), y = b.output({1, 6}, 1);
    b.unary(NodeUnion::XNNSigmoid, x, y);
    auto r = run_graph(b, {{{1, 6}, {1e30f, -1e30f, 3e38f, 1e27f, -3e38f, 2.0f}}}, {{{1, 6}}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(same_ieee(r[0], {1.0f, 0.0f, 1.0f, 1.0f, 0.0f, two}, 1e-6f));
  }
  {
    PayloadBuilder b;
    const uint32_t x = b.input({1, 6}, 0), d = b.input({1, 6}, 1), y = b.output({1, 6}, 2);
    const uint32_t q = b.internal({1, 6});
    b.binary(NodeUnion::XNNDiv, x, d, q);
    b.unary(NodeUnion::XNNSigmoid, q, y);
    auto r = run_graph(
        b, {{{1, 6}, {1e30f, -1e30f, 1.0f, -1.0f, -3e38f, 2.0f}}, {{1, 6}, {1e-30f, 1e-30f, 0.0f, 0.0f, 0.5f, 1.0f}}},
        {{{1, 6}}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(same_ieee(r[0], {1.0f, 0.0f, 1.0f, 0.0f, 0.0f, two}, 1e-6f));
  }
}

// A Convert from fp32 to qint8 or quint8 quantizes NaN to the lowest code, as
// onnxruntime's QuantizeLinear does, and saturates the infinities; finite
// values round to nearest even after the product with 1 / scale, as XNNPACK's.
TEST(XnnpackNaN, QuantizingConvertSendsNaNToTheLowestCode) {
  for (const auto datatype : {fbx::Datatype::qint8, fbx::Datatype::quint8}) {
    const bool is_signed = datatype == fbx::Datatype::qint8;
    const float scale = 0.5f;
    const int32_t zero_point = is_signed ? 3 : 130;
    const float lowest = is_signed ? -128.0f : 0.0f, highest = is_signed ? 127.0f : 255.0f;
    PayloadBuilder b;
    const uint32_t x = b.input({1, 6}, 0), y = b.output({1, 6}, 1);
    const uint32_t q = b.quantized(datatype, {1, 6}, scale, zero_point);
    b.unary(NodeUnion::XNNConvert, x, q);
    b.unary(NodeUnion::XNNConvert, q, y);
    auto r = run_graph(b, {{{1, 6}, {kNaN, kInf, -kInf, 1.25f, 0.75f, -1.0f}}}, {{{1, 6}}});
    ASSERT_EQ(r.size(), 1u);
    const auto real = [&](float code) { return (code - static_cast<float>(zero_point)) * scale; };
    // 1.25 / 0.5 = 2.5 and 0.75 / 0.5 = 1.5 are ties: to 2 and 2.
    EXPECT_TRUE(same_ieee(r[0], {real(lowest), real(highest), real(lowest), 1.0f, 1.0f, -1.0f}, 0.0f))
        << (is_signed ? "qint8" : "quint8");
  }
}

TEST(XnnpackNaN, SoftmaxRowsWithNaNOrInfinityAreNaN) {
  // Rows of 3: NaN, +Infinity largest, -Infinity masked, all -Infinity; then
  // rows of 19 (the vector path and its tail) with masked scores.
  const std::vector<float> short_rows = {kNaN, 1, 2, kInf, 0, 1, -kInf, 0, 1, -kInf, -kInf, -kInf};
  std::vector<float> long_rows = pseudo_random(38, 4, 6.0f);
  long_rows[0] = long_rows[9] = long_rows[18] = long_rows[30] = -kInf;
  PayloadBuilder b;
  const uint32_t x = b.input({4, 3}, 0), y = b.input({2, 19}, 1);
  const uint32_t short_out = b.output({4, 3}, 2), long_out = b.output({2, 19}, 3);
  b.unary(NodeUnion::XNNSoftmax, x, short_out);
  b.unary(NodeUnion::XNNSoftmax, y, long_out);
  auto r = run_graph(b, {{{4, 3}, short_rows}, {{2, 19}, long_rows}}, {{{4, 3}}, {{2, 19}}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(same_ieee(r[0], {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 0.0f, 0.26894142f, 0.73105858f, kNaN, kNaN, kNaN}));
  EXPECT_TRUE(same_ieee(r[1], softmax_reference(long_rows, 19), 2e-6f));
}

TEST(XnnpackNaN, PoolingKeepsNaN) {
  PayloadBuilder b;
  const uint32_t x = b.input({1, 2, 2, 2}, 0);
  const uint32_t maxp = b.output({1, 1, 1, 2}, 1), avgp = b.output({1, 1, 1, 2}, 2), gap = b.output({1, 1, 1, 2}, 3);
  b.pooling(NodeUnion::XNNMaxPooling2d, 0, 2, 2, x, maxp);
  b.pooling(NodeUnion::XNNAvgPooling2d, 0, 2, 2, x, avgp);
  b.unary(NodeUnion::XNNGlobalAvgPooling2d, x, gap);
  auto r = run_graph(b, {{{1, 2, 2, 2}, kSpecials}}, {{{1, 1, 1, 2}}, {{1, 1, 1, 2}}, {{1, 1, 1, 2}}});
  ASSERT_EQ(r.size(), 3u);
  // Channel 0 sees NaN, Infinity, -0 and 0.5; channel 1 -Infinity, 2, -3 and 1.
  EXPECT_TRUE(same_ieee(r[0], {kNaN, 2.0f}));
  EXPECT_TRUE(same_ieee(r[1], {kNaN, -kInf}));
  EXPECT_TRUE(same_ieee(r[2], {kNaN, -kInf}));
}

// y[r, n] = bias[n] + sum_k x[r, k] w[n, k] in double, then `bounds`.
std::vector<float> linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& bias, size_t k, std::pair<float, float> bounds) {
  const size_t rows = x.size() / k, n = bias.size();
  std::vector<float> y(rows * n);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < n; ++o) {
      double sum = bias[o];
      for (size_t i = 0; i < k; ++i) sum += static_cast<double>(x[r * k + i]) * w[o * k + i];
      const float v = static_cast<float>(sum);
      y[r * n + o] = v < bounds.first ? bounds.first : (v > bounds.second ? bounds.second : v);
    }
  }
  return y;
}

TEST(XnnpackNaN, FullyConnectedKeepsNaNAndInfinities) {
  // Rows: NaN, -Infinity, +Infinity, Infinity - Infinity, Infinity times a
  // zero weight (column 2 of channel 0), NaN where channel 0's weight is
  // zero, and an ordinary row. K = 3 is all remainder for kernels that work
  // in fours, where some releases skip zero weights.
  const size_t k = 3, n = 16;
  std::vector<float> w = pseudo_random(n * k, 21);
  for (size_t o = 0; o < n; ++o) w[o * k + 1] = std::fabs(w[o * k + 1]) + 0.1f, w[o * k] = std::fabs(w[o * k]) + 0.1f;
  w[2] = 0.0f;
  const std::vector<float> bias = pseudo_random(n, 22);
  const std::vector<float> x = {kNaN, 1, 1, -kInf, 1, 1, kInf, 1, 1,     kInf, -kInf,
                                0,    1, 1, kInf,  2, 1, kNaN, 2, -0.0f, 0.5f};
  std::vector<float> w_transposed(n * k);  // [K, N], read with the transposed-weights flag
  for (size_t o = 0; o < n; ++o) {
    for (size_t i = 0; i < k; ++i) w_transposed[i * n + o] = w[o * k + i];
  }
  for (bool transposed : {false, true}) {
    for (auto bounds : {kUnbounded, kRelu, std::make_pair(-0.5f, 0.5f)}) {
      SCOPED_TRACE(std::to_string(transposed) + " " + std::to_string(bounds.first));
      PayloadBuilder b;
      const uint32_t in = b.input({7, 3}, 0), out = b.output({7, 16}, 1);
      const uint32_t filter = transposed ? b.constant({3, 16}, w_transposed) : b.constant({16, 3}, w);
      b.fully_connected(in, filter, b.constant({16}, bias), out, transposed ? 1 : 0, bounds);
      auto r = run_graph(b, {{{7, 3}, x}}, {{{7, 16}}});
      ASSERT_EQ(r.size(), 1u);
      EXPECT_TRUE(same_ieee(r[0], linear_reference(x, w, bias, k, bounds)));
    }
  }
}

TEST(XnnpackNaN, FullyConnectedWithAnInfiniteBias) {
  const std::vector<float> w = {1, 1, 1, -1};  // [2, 2]
  const std::vector<float> bias = {kInf, -kInf};
  const std::vector<float> x = {1, 2, -kInf, 0, kNaN, 0};
  PayloadBuilder b;
  const uint32_t in = b.input({3, 2}, 0), out = b.output({3, 2}, 1);
  b.fully_connected(in, b.constant({2, 2}, w), b.constant({2}, bias), out);
  auto r = run_graph(b, {{{3, 2}, x}}, {{{3, 2}}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(same_ieee(r[0], {kInf, -kInf, kNaN, -kInf, kNaN, kNaN}));
}

// NHWC convolution with square padding `pad`, stride 1, in double.
std::vector<float> conv_reference(const std::vector<float>& x, size_t h, size_t w, size_t cin,
                                  const std::vector<float>& filter, const std::vector<float>& bias, size_t kernel,
                                  size_t pad, bool depthwise, std::pair<float, float> bounds) {
  const size_t cout = bias.size();
  const size_t oh = h + 2 * pad - kernel + 1, ow = w + 2 * pad - kernel + 1;
  std::vector<float> y(oh * ow * cout);
  for (size_t oy = 0; oy < oh; ++oy) {
    for (size_t ox = 0; ox < ow; ++ox) {
      for (size_t co = 0; co < cout; ++co) {
        double sum = bias[co];
        for (size_t ky = 0; ky < kernel; ++ky) {
          for (size_t kx = 0; kx < kernel; ++kx) {
            const long iy = static_cast<long>(oy + ky) - static_cast<long>(pad);
            const long ix = static_cast<long>(ox + kx) - static_cast<long>(pad);
            if (iy < 0 || ix < 0 || iy >= static_cast<long>(h) || ix >= static_cast<long>(w)) continue;
            const float* pixel = x.data() + (static_cast<size_t>(iy) * w + static_cast<size_t>(ix)) * cin;
            if (depthwise) {  // filter [1, kernel, kernel, channels]
              sum += static_cast<double>(pixel[co]) * filter[(ky * kernel + kx) * cout + co];
            } else {  // filter [cout, kernel, kernel, cin]
              for (size_t ci = 0; ci < cin; ++ci) {
                sum += static_cast<double>(pixel[ci]) * filter[((co * kernel + ky) * kernel + kx) * cin + ci];
              }
            }
          }
        }
        const float v = static_cast<float>(sum);
        y[(oy * ow + ox) * cout + co] = v < bounds.first ? bounds.first : (v > bounds.second ? bounds.second : v);
      }
    }
  }
  return y;
}

TEST(XnnpackNaN, ConvolutionsKeepNaNAndInfinities) {
  // A 4 x 4 image of 3 channels with NaN at one pixel and both infinities at
  // others: their neighbourhoods are NaN, infinite, or NaN where they meet.
  std::vector<float> x = pseudo_random(4 * 4 * 3, 31);
  x[0] = kNaN;
  x[(1 * 4 + 3) * 3 + 1] = kInf;
  x[(3 * 4 + 3) * 3 + 2] = -kInf;
  x[(3 * 4 + 0) * 3 + 0] = kInf;
  x[(3 * 4 + 1) * 3 + 0] = -kInf;
  const std::vector<float> filter = pseudo_random(8 * 3 * 3 * 3, 32), bias = pseudo_random(8, 33);
  const std::vector<float> dw_filter = pseudo_random(3 * 3 * 3, 34), dw_bias = pseudo_random(3, 35);
  for (auto bounds : {kUnbounded, kRelu}) {
    SCOPED_TRACE(bounds.first);
    Params p;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    p.kernel_h = p.kernel_w = 3;
    p.group_in = 3;
    p.group_out = 8;
    Params dw = p;
    dw.group_in = 1;
    dw.group_out = 1;
    dw.groups = 3;
    PayloadBuilder b;
    const uint32_t in = b.input({1, 4, 4, 3}, 0);
    const uint32_t conv = b.output({1, 4, 4, 8}, 1), depthwise = b.output({1, 4, 4, 3}, 2);
    b.convolution(NodeUnion::XNNConv2d, p, in, b.constant({8, 3, 3, 3}, filter), b.constant({8}, bias), conv, bounds);
    b.convolution(NodeUnion::XNNDepthwiseConv2d, dw, in, b.constant({1, 3, 3, 3}, dw_filter), b.constant({3}, dw_bias),
                  depthwise, bounds);
    auto r = run_graph(b, {{{1, 4, 4, 3}, x}}, {{{1, 4, 4, 8}}, {{1, 4, 4, 3}}});
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(same_ieee(r[0], conv_reference(x, 4, 4, 3, filter, bias, 3, 1, false, bounds)));
    EXPECT_TRUE(same_ieee(r[1], conv_reference(x, 4, 4, 3, dw_filter, dw_bias, 3, 1, true, bounds)));
  }
}

// Transposed convolution, stride 2, no padding: y[oy, ox] gathers x[iy, ix]
// with oy = 2 iy + ky. filter [cout, kernel, kernel, cin].
std::vector<float> deconv_reference(const std::vector<float>& x, size_t h, size_t w, size_t cin,
                                    const std::vector<float>& filter, const std::vector<float>& bias, size_t kernel,
                                    std::pair<float, float> bounds) {
  const size_t cout = bias.size(), oh = (h - 1) * 2 + kernel, ow = (w - 1) * 2 + kernel;
  std::vector<double> sums(oh * ow * cout);
  for (size_t i = 0; i < oh * ow; ++i) {
    for (size_t co = 0; co < cout; ++co) sums[i * cout + co] = bias[co];
  }
  for (size_t iy = 0; iy < h; ++iy) {
    for (size_t ix = 0; ix < w; ++ix) {
      for (size_t ky = 0; ky < kernel; ++ky) {
        for (size_t kx = 0; kx < kernel; ++kx) {
          for (size_t co = 0; co < cout; ++co) {
            for (size_t ci = 0; ci < cin; ++ci) {
              const double weight = filter[((co * kernel + ky) * kernel + kx) * cin + ci];
              sums[((iy * 2 + ky) * ow + ix * 2 + kx) * cout + co] += x[(iy * w + ix) * cin + ci] * weight;
            }
          }
        }
      }
    }
  }
  std::vector<float> y(sums.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const float v = static_cast<float>(sums[i]);
    y[i] = v < bounds.first ? bounds.first : (v > bounds.second ? bounds.second : v);
  }
  return y;
}

TEST(XnnpackNaN, TransposedConvolutionsKeepNaN) {
  // Kernel 3 (XNNPACK's operator) and kernel 2 = stride (etna's patch kernel).
  std::vector<float> x = pseudo_random(3 * 3 * 2, 41);
  x[0] = kNaN;
  x[(2 * 3 + 2) * 2 + 1] = -kInf;
  for (uint32_t kernel : {3u, 2u}) {
    for (auto bounds : {kUnbounded, kRelu}) {
      SCOPED_TRACE(std::to_string(kernel) + " " + std::to_string(bounds.first));
      const uint32_t out = (3 - 1) * 2 + kernel;
      const std::vector<float> filter = pseudo_random(4 * kernel * kernel * 2, 42), bias = pseudo_random(4, 43);
      Params p;
      p.kernel_h = p.kernel_w = kernel;
      p.stride_h = p.stride_w = 2;
      p.group_in = 2;
      p.group_out = 4;
      PayloadBuilder b;
      const uint32_t in = b.input({1, 3, 3, 2}, 0), y = b.output({1, out, out, 4}, 1);
      b.convolution(NodeUnion::XNNConvTranspose2d, p, in, b.constant({4, kernel, kernel, 2}, filter),
                    b.constant({4}, bias), y, bounds);
      auto r = run_graph(b, {{{1, 3, 3, 2}, x}}, {{{1, out, out, 4}}});
      ASSERT_EQ(r.size(), 1u);
      EXPECT_TRUE(same_ieee(r[0], deconv_reference(x, 3, 3, 2, filter, bias, kernel, bounds)));
    }
  }
}

// The fast variant (XNNPACK's kernels) serves calls with finite inputs and
// finite outputs; the NaN-keeping one is made at the first call that needs
// it, and later finite calls go back to the fast one.
TEST(XnnpackNaN, OnlyCallsWithNaNOrInfinitiesTakeTheNaNKeepingVariant) {
  PayloadBuilder b;
  const uint32_t x = b.input({4}, 0), y = b.input({4}, 1), out = b.output({4}, 2);
  b.binary(NodeUnion::XNNDiv, x, y, out, kRelu);
  const auto payload = b.finish(PayloadBuilder::Layout::kConstantRegion, 3);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor lhs(ScalarType::kFloat, {4}), rhs(ScalarType::kFloat, {4}), result(ScalarType::kFloat, {4});
  auto call = [&](const std::vector<float>& a, const std::vector<float>& d) {
    lhs.fill(a);
    rhs.fill(d);
    Status status = run_delegate(**delegate, {&lhs, &rhs, &result});
    EXPECT_TRUE(status) << status.error().message;
    return result.to_vector();
  };
  EXPECT_TRUE(same_ieee(call({1, -2, 3, 8}, {2, 1, 4, 2}), {0.5f, 0.0f, 0.75f, 4.0f}));
  EXPECT_EQ((*delegate)->nan_keeping_calls(), 0u);
  // A NaN input.
  EXPECT_TRUE(same_ieee(call({kNaN, -2, 3, 8}, {2, 1, 4, 2}), {kNaN, 0.0f, 0.75f, 4.0f}));
  EXPECT_EQ((*delegate)->nan_keeping_calls(), 1u);
  EXPECT_TRUE(same_ieee(call({1, -2, 3, 8}, {2, 1, 4, 2}), {0.5f, 0.0f, 0.75f, 4.0f}));
  EXPECT_EQ((*delegate)->nan_keeping_calls(), 1u);
  // Finite inputs, an infinite output (1 / 0): run again keeping NaN, so
  // 0 / 0, which XNNPACK's relu clamp made 0, comes out NaN.
  EXPECT_TRUE(same_ieee(call({1, 0, 3, 8}, {0, 0, 4, 2}), {kInf, kNaN, 0.75f, 4.0f}));
  EXPECT_EQ((*delegate)->nan_keeping_calls(), 2u);
}

// A NaN made inside from finite inputs and clamped by XNNPACK into an
// infinity comes out NaN: the infinite output sends the call to the
// NaN-keeping variant.
TEST(XnnpackNaN, ANaNMadeInsideIsFoundThroughTheInfinityItBecame) {
  PayloadBuilder b;
  const uint32_t x = b.input({4}, 0), y = b.input({4}, 1), out = b.output({4}, 2);
  b.binary(NodeUnion::XNNDiv, x, y, out, kUnbounded);
  auto r = run_graph(b, {{{4}, {0, 1, -1, 6}}, {{4}, {0, 0, 0, 3}}}, {{{4}}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(same_ieee(r[0], {kNaN, kInf, -kInf, 2.0f}));
}

// The square root, reciprocal square root and log of a negative make NaN
// from numbers; a relu after them on XNNPACK would make it 0. The fast
// variant checks those kernels' outputs and runs the call again.
TEST(XnnpackNaN, ANaNMadeBySquareRootOrLogSurvivesALaterRelu) {
  for (NodeUnion type : {NodeUnion::XNNSquareRoot, NodeUnion::XNNReciprocalSquareRoot, NodeUnion::XNNLog}) {
    SCOPED_TRACE(fbx::EnumNameNodeUnion(type));
    PayloadBuilder b;
    const uint32_t x = b.input({4}, 0), made = b.internal({4}), out = b.output({4}, 1);
    b.node(type, fbx::CreateUnary(b.fbb(), x, made, 0).Union());
    b.node(NodeUnion::XNNClamp, fbx::CreateUnary(b.fbb(), made, out, 0).Union(), kRelu);
    auto r = run_graph(b, {{{4}, {-1.0f, 4.0f, 1.0f, -0.5f}}}, {{{4}}});
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].size(), 4u);
    EXPECT_TRUE(std::isnan(r[0][0]));
    EXPECT_TRUE(std::isnan(r[0][3]));
    EXPECT_FALSE(std::isnan(r[0][1]));
  }
}

// The scan that picks a variant finds NaN and infinities anywhere: in the
// vector body and the tail, with either sign, among numbers of every size.
TEST(XnnpackNaN, TheScanFindsEverySpecialValueAtEveryPosition) {
  const float numbers[] = {0.0f, -0.0f, 1.0f, -3.4e38f, 3.4e38f, 1e-45f, -1e-40f, 7.0f};
  const float specials[] = {kNaN, -kNaN, kInf, -kInf};
  for (size_t count : {0u, 1u, 7u, 31u, 32u, 33u, 100u}) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = numbers[i % 8];
    for (auto* scan : {&xnn::float_specials, &xnn::float_specials_scalar}) {
      const xnn::FloatSpecials none = scan(data.data(), count);
      EXPECT_FALSE(none.nan || none.infinity) << count;
    }
    for (size_t at = 0; at < count; ++at) {
      for (float special : specials) {
        std::vector<float> marked = data;
        marked[at] = special;
        for (auto* scan : {&xnn::float_specials, &xnn::float_specials_scalar}) {
          const xnn::FloatSpecials found = scan(marked.data(), count);
          EXPECT_EQ(found.nan, std::isnan(special)) << count << " at " << at;
          EXPECT_EQ(found.infinity, std::isinf(special)) << count << " at " << at;
        }
      }
    }
  }
}

}  // namespace
}  // namespace etna::test
