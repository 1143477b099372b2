// Dynamically quantized convolutions (Convert fp32 -> qdint8 with one scale
// per image, then XNNConv2d over a per-channel qcint8 filter into fp32)
// against a reference computed here in double from the formulas, on every
// dot-product path the CPU has; and the payloads the delegate must refuse.
#include <gtest/gtest.h>

#include <cstring>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "dynamic_quant_support.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

struct Case {
  size_t images = 1, height = 5, width = 6;
  PayloadBuilder::ConvParams conv;  // group_in, group_out, groups, kernel, stride, dilation, padding
  bool bias = true;
  std::optional<std::pair<float, float>> bounds;
  int32_t num_nonbatch_dims = 3;
  fbx::Datatype filter_type = fbx::Datatype::qcint8;

  size_t in_channels() const { return size_t{conv.groups} * conv.group_in; }
  size_t out_channels() const { return size_t{conv.groups} * conv.group_out; }
  size_t field() const { return size_t{conv.kernel_h} * conv.kernel_w * conv.group_in; }
  size_t out_height() const {
    return (height + conv.pad_top + conv.pad_bottom - (conv.kernel_h - 1) * conv.dilation_h - 1) / conv.stride_h + 1;
  }
  size_t out_width() const {
    return (width + conv.pad_left + conv.pad_right - (conv.kernel_w - 1) * conv.dilation_w - 1) / conv.stride_w + 1;
  }
};

Case make_case(uint32_t groups, uint32_t group_in, uint32_t group_out, uint32_t kernel, uint32_t stride = 1,
               uint32_t dilation = 1, uint32_t pad = 0) {
  Case c;
  c.conv.groups = groups;
  c.conv.group_in = group_in;
  c.conv.group_out = group_out;
  c.conv.kernel_h = c.conv.kernel_w = kernel;
  c.conv.stride_h = c.conv.stride_w = stride;
  c.conv.dilation_h = c.conv.dilation_w = dilation;
  c.conv.pad_top = c.conv.pad_right = c.conv.pad_bottom = c.conv.pad_left = pad;
  return c;
}

// Filter [out, kh, kw, in/groups] of signed 8-bit values, scales per output
// channel, bias per output channel.
struct Model {
  std::vector<int> w;
  std::vector<float> scales;
  std::vector<float> bias;
};

Model make_model(const Case& c) {
  Model m;
  uint32_t state = 777u + static_cast<uint32_t>(c.field() * 13 + c.out_channels());
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  m.w.resize(c.out_channels() * c.field());
  for (int& v : m.w) v = static_cast<int>(next() % 256) - 128;
  for (size_t n = 0; n < c.out_channels(); ++n) m.scales.push_back(static_cast<float>(1 + next() % 64) / 256.0f);
  for (size_t n = 0; n < c.out_channels(); ++n) {
    m.bias.push_back(static_cast<float>(static_cast<int>(next() % 200) - 100) / 50.0f);
  }
  return m;
}

std::vector<uint32_t> nhwc(size_t n, size_t h, size_t w, size_t c) {
  return {static_cast<uint32_t>(n), static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(c)};
}

// Convert -> XNNConv2d with the case's filter; input 0, output 1.
std::vector<uint8_t> build(const Case& c, const Model& m, PayloadBuilder& b) {
  const auto in_dims = nhwc(c.images, c.height, c.width, c.in_channels());
  const uint32_t x = b.input(in_dims, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), c.num_nonbatch_dims);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, in_dims, fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  std::vector<uint8_t> bytes;
  for (int v : m.w) bytes.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
  if (c.filter_type == fbx::Datatype::qcint4) bytes.resize((bytes.size() + 1) / 2);
  const uint32_t filter = b.channelwise(
      c.filter_type, nhwc(c.out_channels(), c.conv.kernel_h, c.conv.kernel_w, c.conv.group_in), m.scales, 0, bytes);
  const uint32_t bias = c.bias ? b.constant({static_cast<uint32_t>(c.out_channels())}, m.bias) : PayloadBuilder::kNone;
  const uint32_t y = b.output(nhwc(c.images, c.out_height(), c.out_width(), c.out_channels()), 1);
  b.unary(NodeUnion::XNNConvert, x, q);
  b.convolution(NodeUnion::XNNConv2d, c.conv, q, filter, bias, y, c.bounds);
  return b.finish(Layout::kNamedData, 2);
}

// Each image quantized as one run (XNNPACK's qd8 rule; the whole batch as
// one run with `batch_shares_scale`, to show a test tells them apart), then the
// convolution of the dequantized values in double: padding is 0.0, which the
// image's zero point represents exactly.
std::vector<float> reference(const Case& c, const Model& m, const std::vector<float>& x,
                             bool batch_shares_scale = false) {
  const size_t h = c.height, w = c.width, cin = c.in_channels(), cout = c.out_channels();
  const size_t oh = c.out_height(), ow = c.out_width(), gi = c.conv.group_in, go = c.conv.group_out;
  std::vector<float> y(c.images * oh * ow * cout);
  const size_t image_size = h * w * cin;
  const std::vector<double> batch = batch_shares_scale ? qd8_dequantized(x.data(), x.size()) : std::vector<double>{};
  for (size_t n = 0; n < c.images; ++n) {
    std::vector<double> real;
    if (batch_shares_scale) {
      real.assign(batch.data() + n * image_size, batch.data() + (n + 1) * image_size);
    } else {
      real = qd8_dequantized(x.data() + n * image_size, image_size);
    }
    for (size_t oy = 0; oy < oh; ++oy) {
      for (size_t ox = 0; ox < ow; ++ox) {
        for (size_t oc = 0; oc < cout; ++oc) {
          const size_t g = oc / go;
          double sum = 0;
          for (size_t ky = 0; ky < c.conv.kernel_h; ++ky) {
            for (size_t kx = 0; kx < c.conv.kernel_w; ++kx) {
              const long iy = long(oy * c.conv.stride_h + ky * c.conv.dilation_h) - long(c.conv.pad_top);
              const long ix = long(ox * c.conv.stride_w + kx * c.conv.dilation_w) - long(c.conv.pad_left);
              if (iy < 0 || ix < 0 || iy >= long(h) || ix >= long(w)) continue;
              for (size_t ic = 0; ic < gi; ++ic) {
                const double a = real[(size_t(iy) * w + size_t(ix)) * cin + g * gi + ic];
                sum += a * m.w[((oc * c.conv.kernel_h + ky) * c.conv.kernel_w + kx) * gi + ic];
              }
            }
          }
          double v = sum * m.scales[oc] + (c.bias ? m.bias[oc] : 0.0);
          if (c.bounds) v = std::min(std::max(v, double(c.bounds->first)), double(c.bounds->second));
          y[((n * oh + oy) * ow + ox) * cout + oc] = static_cast<float>(v);
        }
      }
    }
  }
  return y;
}

std::vector<float> run_case(const Case& c, const Model& m, const std::vector<float>& x, xnn::DotPath path) {
  PayloadBuilder b;
  const auto payload = build(c, m, b);
  auto sizes = [](const std::vector<uint32_t>& dims) { return std::vector<int64_t>(dims.begin(), dims.end()); };
  return run_on_path(payload, b, sizes(nhwc(c.images, c.height, c.width, c.in_channels())), x,
                     sizes(nhwc(c.images, c.out_height(), c.out_width(), c.out_channels())), path);
}

// The case on every path: close to the reference, identical across paths.
void check_case(const Case& c) {
  const Model m = make_model(c);
  const auto x =
      pseudo_random(c.images * c.height * c.width * c.in_channels(), static_cast<uint32_t>(c.field() + c.images), 3.0f);
  expect_same_on_every_path([&](xnn::DotPath path) { return run_case(c, m, x, path); }, reference(c, m, x), 2e-5f);
}

TEST(XnnpackDynamicConv, PointwiseOddChannels) { check_case(make_case(1, 7, 5, 1)); }

TEST(XnnpackDynamicConv, ThreeByThreePaddedSeveralImages) {
  Case c = make_case(1, 16, 12, 3, 1, 1, 1);
  c.images = 3;
  check_case(c);
}

TEST(XnnpackDynamicConv, StrideDilationAndUnevenPadding) {
  Case c = make_case(1, 5, 9, 3, 2, 2, 0);
  c.height = 11;
  c.width = 9;
  c.conv.pad_top = 2;
  c.conv.pad_left = 1;
  c.conv.pad_bottom = 0;
  c.conv.pad_right = 3;
  c.conv.stride_w = 1;
  check_case(c);
}

TEST(XnnpackDynamicConv, RectangularKernel) {
  Case c = make_case(1, 3, 4, 1, 1, 1, 1);
  c.conv.kernel_h = 2;
  c.conv.kernel_w = 5;
  c.conv.pad_left = c.conv.pad_right = 2;
  check_case(c);
}

TEST(XnnpackDynamicConv, GroupedChannels) {
  Case c = make_case(3, 4, 5, 3, 1, 1, 1);
  c.images = 2;
  check_case(c);
}

TEST(XnnpackDynamicConv, DepthwiseAsGroupedConvolution) {
  // One input channel per group, with a channel multiplier of 2.
  Case c = make_case(6, 1, 2, 3, 1, 1, 1);
  check_case(c);
}

TEST(XnnpackDynamicConv, ClampAndNoBias) {
  Case c = make_case(1, 8, 6, 3, 1, 1, 1);
  c.bias = false;
  c.bounds = std::make_pair(-2.0f, 1.5f);
  check_case(c);
}

TEST(XnnpackDynamicConv, ManyPixelsSpanSeveralTiles) {
  // 20 x 20 outputs: more pixels than one im2col tile.
  Case c = make_case(1, 4, 8, 3, 1, 1, 1);
  c.height = c.width = 20;
  check_case(c);
}

TEST(XnnpackDynamicConv, EachImageHasItsOwnScale) {
  // Image 1 is image 0 times 100: one scale for the batch would flatten
  // image 0 to a few levels, and the result would not match the reference.
  Case c = make_case(1, 4, 3, 3, 1, 1, 1);
  c.images = 2;
  const Model m = make_model(c);
  const size_t per_image = c.height * c.width * c.in_channels();
  auto x = pseudo_random(per_image, 5);
  for (size_t i = 0; i < per_image; ++i) x.push_back(x[i] * 100.0f);
  const auto per_image_reference = reference(c, m, x);
  ASSERT_FALSE(close_to(reference(c, m, x, true), per_image_reference, 1e-2f));
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    EXPECT_TRUE(close_to(run_case(c, m, x, path), per_image_reference, 2e-5f)) << xnn::dot_path_name(path);
  }
}

TEST(XnnpackDynamicConv, SmallerImagesReuseThePackedWeights) {
  const Case c = make_case(1, 6, 4, 3, 1, 1, 1);
  PayloadBuilder b;
  const Model m = make_model(c);
  const auto payload = build(c, m, b);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor x(ScalarType::kFloat, {1, 5, 6, 6}, 0, ShapeDynamism::kBound);
  LocalTensor y(ScalarType::kFloat, {1, 5, 6, 4}, 0, ShapeDynamism::kBound);
  for (int64_t height : {3, 5, 2}) {
    std::vector<float> input;
    ASSERT_NO_FATAL_FAILURE(run_resized(**delegate, x, y, {1, height, 6, 6}, 40 + uint32_t(height), input));
    ASSERT_EQ(y.tensor().size(1), height);
    Case at_size = c;
    at_size.height = size_t(height);
    EXPECT_TRUE(close_to(y.to_vector(), reference(at_size, m, input), 2e-5f)) << "height " << height;
  }
  EXPECT_EQ(context.stats().operators_created, 1u);
}

TEST(XnnpackDynamicConv, SameWeightsArePackedOncePerProgram) {
  const Case c = make_case(2, 3, 4, 3, 1, 1, 1);
  PayloadBuilder b;
  const auto payload = build(c, make_model(c), b);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto program = std::make_shared<xnn::XnnpackProgramContext>();
  std::vector<std::unique_ptr<xnn::XnnpackDelegate>> delegates;
  for (int i = 0; i < 2; ++i) {
    auto parsed = xnn::parse_payload(ByteSpan{payload.data(), payload.size()}, b.lookup());
    ASSERT_TRUE(parsed);
    auto delegate = xnn::XnnpackDelegate::create(std::move(*parsed), context, "d", program);
    ASSERT_TRUE(delegate) << delegate.error().message;
    delegates.push_back(std::move(delegate.value()));
  }
  EXPECT_EQ(program->operators_created(), 1u);
}

// ---- payloads the delegate refuses ----

Error init_error_of(const Case& c) {
  PayloadBuilder b;
  const auto payload = build(c, make_model(c), b);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  EXPECT_FALSE(delegate);
  return delegate ? Error{} : delegate.error();
}

TEST(XnnpackDynamicConv, PerTokenInputIsRefused) {
  // XNNPACK's convolution reads one scale per image; per-pixel parameters
  // would be read as the wrong ones.
  Case c = make_case(1, 4, 4, 3);
  c.num_nonbatch_dims = 1;
  expect_rejected(init_error_of(c), ErrorCode::kUnsupportedOperator,
                  {"node 1 (XNNConv2d)", "num_nonbatch_dims 1", "needs 3"});
}

TEST(XnnpackDynamicConv, NonbatchDimsBeyondTheRankAreInvalid) {
  Case c = make_case(1, 4, 4, 3);
  c.num_nonbatch_dims = 5;
  expect_rejected(init_error_of(c), ErrorCode::kInvalidProgram, {"num_nonbatch_dims 5", "rank 4"});
}

TEST(XnnpackDynamicConv, FourBitFiltersAreRefused) {
  Case c = make_case(1, 4, 4, 1);
  c.filter_type = fbx::Datatype::qcint4;
  expect_rejected(init_error_of(c), ErrorCode::kUnsupportedOperator, {"filter", "qcint4"});
}

// Convert -> `type` (3x3 over a [1, 4, 4, 2] image) with a qcint8 filter of
// `filter_dims` quantized along `channel_dim`; the init error.
Error other_convolution_error(NodeUnion type, std::vector<uint32_t> filter_dims, int32_t channel_dim,
                              uint32_t flags = 0) {
  PayloadBuilder b;
  const uint32_t x = b.input({1, 4, 4, 2}, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 3);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, {1, 4, 4, 2}, fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  const uint32_t out = filter_dims[static_cast<size_t>(channel_dim)];
  const uint32_t w = b.channelwise(fbx::Datatype::qcint8, filter_dims, std::vector<float>(out, 1.0f), channel_dim,
                                   std::vector<uint8_t>(out * 9 * 2, 1));
  const bool depthwise = type == NodeUnion::XNNDepthwiseConv2d;
  const uint32_t pad = flags & 0x4 ? 0 : 1;  // SAME padding takes no explicit padding
  const uint32_t group_channels = depthwise ? 1 : 2, groups = depthwise ? 2 : 1;
  const uint32_t y = b.output({1, 4, 4, 2}, 1);
  b.unary(NodeUnion::XNNConvert, x, q);
  b.node(type, fbx::CreateConvolution(b.fbb(), pad, pad, pad, pad, 3, 3, 1, 1, 1, 1, group_channels, group_channels,
                                      groups, 0, 0, q, w, PayloadBuilder::kNone, y, flags)
                   .Union());
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(b.finish(Layout::kConstantRegion, 2), context, b.lookup());
  EXPECT_FALSE(delegate);
  return delegate ? Error{} : delegate.error();
}

TEST(XnnpackDynamicConv, SamePaddingIsRefused) {
  expect_rejected(other_convolution_error(NodeUnion::XNNConv2d, {2, 3, 3, 2}, 0, 0x4), ErrorCode::kUnsupportedOperator,
                  {"SAME padding", "qdint8"});
}

TEST(XnnpackDynamicConv, DepthwiseAndTransposedNodesAreRefused) {
  expect_rejected(other_convolution_error(NodeUnion::XNNDepthwiseConv2d, {1, 3, 3, 2}, 3),
                  ErrorCode::kUnsupportedOperator, {"XNNDepthwiseConv2d", "qdint8", "XNNConv2d with groups"});
  expect_rejected(other_convolution_error(NodeUnion::XNNConvTranspose2d, {2, 3, 3, 2}, 0),
                  ErrorCode::kUnsupportedOperator, {"XNNConvTranspose2d", "qdint8"});
}

}  // namespace
}  // namespace etna::test
