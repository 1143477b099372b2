// Dynamically quantized fully connected layers (Convert fp32 -> qdint8, then
// FullyConnected over qcint8 / qcint4 / qbint4 weights) against a reference
// computed here from the dequantized formula, on every dot-product path the
// CPU has; and the payloads the delegate must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "dynamic_quant_support.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

// How the test writes the filter.
enum class Weights { kQc8, kQc8Transposed, kQc4, kQb4Bf16, kQb4Fp32, kQb4Buffer };

struct Case {
  size_t rows = 1, in = 8, out = 4;
  Weights weights = Weights::kQc8;
  size_t group = 32;
  bool bias = true;
  std::optional<std::pair<float, float>> bounds;
  int32_t num_nonbatch_dims = 1;
  bool sequence = false;  // rows as [1, rows, channels], as LLM exports write them
};

// The dims of a [rows, channels] tensor of the case.
std::vector<uint32_t> dims_of(const Case& c, size_t channels) {
  const auto rows = static_cast<uint32_t>(c.rows), width = static_cast<uint32_t>(channels);
  return c.sequence ? std::vector<uint32_t>{1, rows, width} : std::vector<uint32_t>{rows, width};
}

Case make_case(size_t rows, size_t in, size_t out, Weights weights, size_t group = 32) {
  Case c;
  c.rows = rows;
  c.in = in;
  c.out = out;
  c.weights = weights;
  c.group = group;
  return c;
}

uint16_t bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);  // values below are exact in bf16
}

// Weights, scales (per channel, or per channel and block) and bias of a case.
struct Model {
  std::vector<int> w;         // [out, in] signed values
  std::vector<float> scales;  // as the delegate will see them (bf16-rounded for blocks)
  std::vector<float> bias;
};

Model make_model(const Case& c) {
  Model m;
  const bool four = c.weights != Weights::kQc8 && c.weights != Weights::kQc8Transposed;
  uint32_t state = 12345u + static_cast<uint32_t>(c.in * 31 + c.out);
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  m.w.resize(c.out * c.in);
  for (int& v : m.w) v = four ? static_cast<int>(next() % 16) - 8 : static_cast<int>(next() % 256) - 128;
  const bool blocks =
      c.weights == Weights::kQb4Bf16 || c.weights == Weights::kQb4Fp32 || c.weights == Weights::kQb4Buffer;
  const size_t count = blocks ? c.out * (c.in / c.group) : c.out;
  for (size_t i = 0; i < count; ++i) {
    // Multiples of 1/64 in [1/64, 4]: exact in bf16, so every source of scales agrees.
    m.scales.push_back(static_cast<float>(1 + next() % 256) / 64.0f);
  }
  for (size_t n = 0; n < c.out; ++n) m.bias.push_back(static_cast<float>(static_cast<int>(next() % 200) - 100) / 50.0f);
  return m;
}

// The exporter's 4-bit layout: rows padded to whole bytes, element 2i in the
// low nibble of byte i, element 2i + 1 in the high one, each stored plus 8.
std::vector<uint8_t> pack_nibbles(const std::vector<int>& w, size_t out, size_t in) {
  const size_t row = (in + 1) / 2;
  std::vector<uint8_t> bytes(out * row, 0);
  for (size_t n = 0; n < out; ++n) {
    for (size_t k = 0; k < in; ++k) {
      const uint8_t code = static_cast<uint8_t>(w[n * in + k] + 8);
      bytes[n * row + k / 2] |= (k % 2) ? static_cast<uint8_t>(code << 4) : code;
    }
  }
  return bytes;
}

// Convert -> FullyConnected with the case's weights; inputs then outputs.
std::vector<uint8_t> build(const Case& c, const Model& m, PayloadBuilder& b) {
  const std::vector<uint32_t> dims = dims_of(c, c.in);
  const uint32_t x = b.input(dims, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), c.num_nonbatch_dims);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, dims, fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  const uint32_t out = static_cast<uint32_t>(c.out), in = static_cast<uint32_t>(c.in);
  uint32_t filter = 0;
  uint32_t flags = 0;
  switch (c.weights) {
    case Weights::kQc8:
    case Weights::kQc8Transposed: {
      const bool transposed = c.weights == Weights::kQc8Transposed;
      std::vector<uint8_t> bytes(c.out * c.in);
      for (size_t n = 0; n < c.out; ++n) {
        for (size_t k = 0; k < c.in; ++k) {
          bytes[transposed ? k * c.out + n : n * c.in + k] =
              static_cast<uint8_t>(static_cast<int8_t>(m.w[n * c.in + k]));
        }
      }
      filter = b.channelwise(fbx::Datatype::qcint8,
                             transposed ? std::vector<uint32_t>{in, out} : std::vector<uint32_t>{out, in}, m.scales,
                             transposed ? 1 : 0, bytes);
      flags = transposed ? 1 : 0;
      break;
    }
    case Weights::kQc4:
      filter = b.channelwise(fbx::Datatype::qcint4, {out, in}, m.scales, 0, pack_nibbles(m.w, c.out, c.in));
      break;
    case Weights::kQb4Bf16:
    case Weights::kQb4Fp32:
    case Weights::kQb4Buffer: {
      std::vector<uint16_t> bf16;
      for (float s : m.scales) bf16.push_back(bf16_bits(s));
      flatbuffers::Offset<fbx::PerChannelGroupQuant> params;
      const auto group = static_cast<int32_t>(c.group);
      if (c.weights == Weights::kQb4Bf16) {
        params = fbx::CreatePerChannelGroupQuant(b.fbb(), 0, 0, group, b.fbb().CreateVector(bf16));
      } else if (c.weights == Weights::kQb4Fp32) {
        params = fbx::CreatePerChannelGroupQuant(b.fbb(), b.fbb().CreateVector(m.scales), 0, group);
      } else {
        std::vector<uint8_t> bytes(bf16.size() * 2);
        std::memcpy(bytes.data(), bf16.data(), bytes.size());
        const uint32_t index = b.buffer(bytes);
        params = fbx::CreatePerChannelGroupQuant(b.fbb(), 0, 0, group, 0, index, static_cast<uint32_t>(bf16.size()));
      }
      const auto packed = pack_nibbles(m.w, c.out, c.in);
      filter = b.quantized_with(fbx::Datatype::qbint4, {out, in}, fbx::QuantParams::PerChannelGroupQuant,
                                params.Union(), &packed);
      break;
    }
  }
  const uint32_t bias = c.bias ? b.constant({out}, m.bias) : PayloadBuilder::kNone;
  const uint32_t y = b.output(dims_of(c, c.out), 1);
  b.unary(NodeUnion::XNNConvert, x, q);
  b.fully_connected(q, filter, bias, y, flags, c.bounds);
  return b.finish(Layout::kNamedData, 2);
}

// A case's model and payload (the builder keeps the named data).
struct Built {
  explicit Built(const Case& c) : model(make_model(c)), payload(build(c, model, builder)) {}
  Model model;
  PayloadBuilder builder;
  std::vector<uint8_t> payload;
};

// XNNPACK's qd8 conversion of one row, then the dequantized product in double.
std::vector<float> reference(const Case& c, const Model& m, const std::vector<float>& x) {
  std::vector<float> y(c.rows * c.out);
  const bool blocks =
      c.weights == Weights::kQb4Bf16 || c.weights == Weights::kQb4Fp32 || c.weights == Weights::kQb4Buffer;
  for (size_t r = 0; r < c.rows; ++r) {
    const std::vector<double> real = qd8_dequantized(x.data() + r * c.in, c.in);
    for (size_t n = 0; n < c.out; ++n) {
      double sum = c.bias ? m.bias[n] : 0.0;
      for (size_t k = 0; k < c.in; ++k) {
        const float s = blocks ? m.scales[n * (c.in / c.group) + k / c.group] : m.scales[n];
        sum += real[k] * m.w[n * c.in + k] * s;
      }
      float v = static_cast<float>(sum);
      if (c.bounds) v = std::min(std::max(v, c.bounds->first), c.bounds->second);
      y[r * c.out + n] = v;
    }
  }
  return y;
}

// Runs the case on one dot-product path; the delegate's output.
std::vector<float> run_case(const Case& c, const Model& m, const std::vector<float>& x, xnn::DotPath path) {
  PayloadBuilder b;
  const auto payload = build(c, m, b);
  auto sizes = [&](size_t channels) {
    const auto dims = dims_of(c, channels);
    return std::vector<int64_t>(dims.begin(), dims.end());
  };
  return run_on_path(payload, b, sizes(c.in), x, sizes(c.out), path);
}

// The case on every path: close to the reference, identical across paths.
void check_case(const Case& c, float range = 2.0f, float tolerance = 2e-5f) {
  const Model m = make_model(c);
  const auto x = pseudo_random(c.rows * c.in, static_cast<uint32_t>(c.rows * 7 + c.in), range);
  expect_same_on_every_path([&](xnn::DotPath path) { return run_case(c, m, x, path); }, reference(c, m, x), tolerance);
}

TEST(XnnpackDynamicQuant, PerChannelInt8OddSizesOneAndSeveralRows) {
  for (size_t rows : {1u, 3u}) check_case(make_case(rows, 37, 5, Weights::kQc8));
}

TEST(XnnpackDynamicQuant, PerChannelInt8TransposedFilter) { check_case(make_case(2, 70, 9, Weights::kQc8Transposed)); }

TEST(XnnpackDynamicQuant, PerChannelFourBitOddInputChannels) {
  // Rows of 19 bytes, the last high nibble padding.
  for (size_t rows : {1u, 4u}) check_case(make_case(rows, 37, 7, Weights::kQc4));
}

TEST(XnnpackDynamicQuant, BlockwiseFourBitScaleSources) {
  for (Weights weights : {Weights::kQb4Bf16, Weights::kQb4Fp32, Weights::kQb4Buffer}) {
    check_case(make_case(5, 96, 11, weights));
  }
}

TEST(XnnpackDynamicQuant, BlockwiseGroupSizesAndLargerTiles) {
  // 19 rows: a task's tile of 16 (eight at a time on VNNI, four on AVX2 and
  // NEON), then three single rows (a pair and one on i8mm). Groups of 8 and 16
  // run on VNNI, NEON and the portable path (AVX2 falls back to the latter).
  for (size_t group : {8u, 16u, 32u, 64u, 128u}) check_case(make_case(19, 256, 21, Weights::kQb4Bf16, group));
}

TEST(XnnpackDynamicQuant, RowAndChannelRemaindersOfTheVectorTiles) {
  // Vector paths take rows eight (VNNI, two groups of 8 channels at a time)
  // or four at a time, then four, then pairs (i8mm), and single rows with
  // channels in runs of two or four groups: batches and widths that leave
  // every remainder.
  for (size_t rows : {1u, 2u, 4u, 5u, 7u, 8u, 13u, 15u}) {
    for (size_t out : {8u, 16u, 33u, 40u, 52u}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " out " + std::to_string(out));
      // 200 products of 8-bit weights: outputs cancel terms a thousand times
      // larger, so fp32 rounding (the same on every path) reaches 1e-4.
      check_case(make_case(rows, 200, out, Weights::kQc8), 2.0f, 1e-4f);
      // 4-bit rows of 130 codes are packed code by code, of 192 sixteen bytes
      // at a time, of 200 sixteen bytes at a time and then four.
      check_case(make_case(rows, 130, out, Weights::kQc4));
      check_case(make_case(rows, 192, out, Weights::kQc4));
      check_case(make_case(rows, 200, out, Weights::kQc4));
      for (size_t group : {8u, 32u, 64u}) check_case(make_case(rows, 192, out, Weights::kQb4Bf16, group));
    }
  }
}

TEST(XnnpackDynamicQuant, SequenceShapedInputsQuantizePerToken) {
  Case c = make_case(5, 128, 24, Weights::kQb4Bf16);
  c.sequence = true;
  c.bias = false;
  check_case(c);
}

// Rows whose products with the multiplier fall on a tie: hi - lo = 1.02 gives
// m = 250 exactly, while 1 / (1 / m) (the 2022 rule) is 249.999985. 0.006 * m
// is 1.5 (code 2, ties to even) where the old rule gave 1.4999999 (code 1);
// with hi - lo = 1.08, 0.036 * m is 8.5 (code 8) where the old rule gave
// 8.500001 (code 9).
TEST(XnnpackDynamicQuant, RowParametersFollowXnnpackAtTies) {
  for (Weights weights : {Weights::kQc8, Weights::kQc4, Weights::kQb4Fp32}) {
    SCOPED_TRACE(static_cast<int>(weights));
    Case c = make_case(2, 64, 16, weights);
    const Model m = make_model(c);
    std::vector<float> x(c.rows * c.in, 0.0f);
    x[0] = 1.02f;
    x[1] = 0.006f;
    x[c.in] = 1.08f;
    x[c.in + 5] = 0.036f;
    expect_same_on_every_path([&](xnn::DotPath path) { return run_case(c, m, x, path); }, reference(c, m, x), 2e-5f);
  }
}

// An all-zero row is all zero-point codes: every output is exactly the bias
// (the zero point is taken off in integers, as XNNPACK does).
TEST(XnnpackDynamicQuant, AllZeroRowGivesExactlyTheBias) {
  for (Weights weights : {Weights::kQc8, Weights::kQc4, Weights::kQb4Fp32}) {
    SCOPED_TRACE(static_cast<int>(weights));
    Case c = make_case(2, 96, 24, weights);
    const Model m = make_model(c);
    std::vector<float> x = pseudo_random(c.rows * c.in, 3, 2.0f);
    std::fill(x.begin(), x.begin() + static_cast<long>(c.in), 0.0f);
    const auto expected = reference(c, m, x);
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(xnn::dot_path_name(path));
      const auto y = run_case(c, m, x, path);
      ASSERT_EQ(y.size(), c.rows * c.out);
      for (size_t n = 0; n < c.out; ++n) EXPECT_EQ(y[n], m.bias[n]) << "channel " << n;
      EXPECT_TRUE(close_to(y, expected, 2e-5f));
    }
  }
}

// A row holding NaN or an infinity has no quantization range: its outputs are
// NaN (as quantizing it in PyTorch gives); the other rows are unaffected.
TEST(XnnpackDynamicQuant, NonFiniteRowsGiveNaN) {
  Case c = make_case(3, 64, 16, Weights::kQc8);
  const Model m = make_model(c);
  std::vector<float> x = pseudo_random(c.rows * c.in, 9, 2.0f);
  // The reference quantizes every row, so it gets zeros where the rows are non-finite; only row 0 is compared.
  std::vector<float> finite = x;
  std::fill(finite.begin() + c.in, finite.end(), 0.0f);
  const auto expected = reference(c, m, finite);
  x[c.in + 3] = NAN;
  x[2 * c.in + 7] = INFINITY;
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    const auto y = run_case(c, m, x, path);
    ASSERT_EQ(y.size(), c.rows * c.out);
    for (size_t n = 0; n < c.out; ++n) {
      EXPECT_NEAR(y[n], expected[n], 2e-5f * std::max(1.0f, std::fabs(expected[n])));
      EXPECT_TRUE(std::isnan(y[c.out + n])) << "NaN row, channel " << n << ": " << y[c.out + n];
      EXPECT_TRUE(std::isnan(y[2 * c.out + n])) << "infinite row, channel " << n << ": " << y[2 * c.out + n];
    }
  }
}

TEST(XnnpackDynamicQuant, ClampAndNoBias) {
  Case c = make_case(3, 64, 8, Weights::kQb4Bf16);
  c.bias = false;
  c.bounds = std::make_pair(-3.0f, 2.5f);
  check_case(c, 4.0f);
}

TEST(XnnpackDynamicQuant, LowNibbleIsTheEvenElement) {
  // Weights [3, -5]: byte (3 + 8) | (-5 + 8) << 4. Input [1, 0] quantizes
  // exactly (scale 1/255, zero point -128), so the output is 3 * scale.
  Case c = make_case(1, 2, 1, Weights::kQc4);
  c.bias = false;
  Model m;
  m.w = {3, -5};
  m.scales = {0.5f};
  EXPECT_EQ(pack_nibbles(m.w, 1, 2), std::vector<uint8_t>{0x3B});
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    const auto y = run_case(c, m, {1.0f, 0.0f}, path);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_FLOAT_EQ(y[0], 1.5f) << xnn::dot_path_name(path);
  }
}

TEST(XnnpackDynamicQuant, SmallerBatchesReuseThePackedWeights) {
  const Case c = make_case(6, 64, 10, Weights::kQb4Bf16);
  const Built built(c);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(built.payload, context, built.builder.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor x(ScalarType::kFloat, {6, 64}, 0, ShapeDynamism::kBound);
  LocalTensor y(ScalarType::kFloat, {6, 10}, 0, ShapeDynamism::kBound);
  for (int64_t batch : {3, 1, 6}) {
    std::vector<float> input;
    ASSERT_NO_FATAL_FAILURE(run_resized(**delegate, x, y, {batch, 64}, 70 + uint32_t(batch), input));
    ASSERT_EQ(y.tensor().size(0), batch);
    Case at_batch = c;
    at_batch.rows = size_t(batch);
    EXPECT_TRUE(close_to(y.to_vector(), reference(at_batch, built.model, input), 2e-5f)) << "batch " << batch;
  }
  EXPECT_EQ(context.stats().operators_created, 1u);
}

TEST(XnnpackDynamicQuant, ConvertToQdint8RunsAsEtnaKernel) {
  const Built built(Case{});
  auto parsed = xnn::parse_payload(ByteSpan{built.payload.data(), built.payload.size()}, built.builder.lookup());
  ASSERT_TRUE(parsed);
  ASSERT_TRUE(xnn::check_graph(parsed->graph));
  const auto& nodes = parsed->graph.nodes;
  EXPECT_EQ(xnn::engine_for(parsed->graph, nodes[0]), xnn::Engine::kEtnaKernel);
  EXPECT_EQ(xnn::engine_for(parsed->graph, nodes[1]), xnn::Engine::kPackedOperator);
}

// Two methods' payloads (here: for one and for three rows) carry the same
// weights' scales each: the program keeps one list of them, and packs once.
TEST(XnnpackDynamicQuant, PayloadsOfAProgramShareEqualScaleLists) {
  const Built one_row(make_case(1, 64, 4, Weights::kQb4Bf16));
  const Built three_rows(make_case(3, 64, 4, Weights::kQb4Bf16));
  ASSERT_NE(one_row.payload, three_rows.payload);
  auto program = std::make_shared<xnn::XnnpackProgramContext>();
  std::vector<std::shared_ptr<const xnn::ParsedPayload>> remembered;
  for (const Built* built : {&one_row, &three_rows}) {
    const ByteSpan bytes{built->payload.data(), built->payload.size()};
    auto parsed = xnn::parse_payload(bytes, built->builder.lookup());
    ASSERT_TRUE(parsed);
    program->remember_checked_payload(bytes, std::move(*parsed));
    remembered.push_back(program->checked_payload(bytes));
    ASSERT_TRUE(remembered.back());
  }
  auto block_scales = [](const xnn::ParsedPayload& payload) {
    for (const xnn::Value& value : payload.graph.values) {
      if (value.quant.kind == xnn::Quantization::Kind::kBlockwise) return value.quant.channel_scales;
    }
    return xnn::ScaleList();
  };
  const xnn::ScaleList first = block_scales(*remembered[0]), second = block_scales(*remembered[1]);
  ASSERT_EQ(first.size(), 4u * 2u);
  EXPECT_EQ(first.identity(), second.identity());

  xnn::XnnpackModuleContext context(BackendOptions{});
  std::vector<std::unique_ptr<xnn::XnnpackDelegate>> delegates;
  for (const auto& payload : remembered) {
    auto delegate = xnn::XnnpackDelegate::create(*payload, context, "d", program);
    ASSERT_TRUE(delegate) << delegate.error().message;
    delegates.push_back(std::move(*delegate));
  }
  EXPECT_EQ(program->operators_created(), 1u);
}

TEST(XnnpackDynamicQuant, SameWeightsArePackedOncePerProgram) {
  const Built built(make_case(1, 64, 4, Weights::kQb4Bf16));
  const auto& payload = built.payload;
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto program = std::make_shared<xnn::XnnpackProgramContext>();
  std::vector<std::unique_ptr<xnn::XnnpackDelegate>> delegates;
  for (int i = 0; i < 2; ++i) {
    auto parsed = xnn::parse_payload(ByteSpan{payload.data(), payload.size()}, built.builder.lookup());
    ASSERT_TRUE(parsed);
    auto delegate = xnn::XnnpackDelegate::create(std::move(*parsed), context, "d", program);
    ASSERT_TRUE(delegate) << delegate.error().message;
    delegates.push_back(std::move(*delegate));
  }
  EXPECT_EQ(program->operators_created(), 1u);
}

// ---- payloads the delegate refuses ----

// The error initialising a payload gives (it must fail).
Error init_error(const std::vector<uint8_t>& payload, const PayloadBuilder& b) {
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  EXPECT_FALSE(delegate);
  return delegate ? Error{} : delegate.error();
}

Error init_error_of(const Case& c, const std::function<void(Model&)>& edit = {}) {
  Model m = make_model(c);
  if (edit) edit(m);
  PayloadBuilder b;
  const auto payload = build(c, m, b);
  return init_error(payload, b);
}

TEST(XnnpackDynamicQuant, GroupSizeMustDivideInputChannels) {
  const Case c = make_case(1, 48, 4, Weights::kQb4Bf16, 32);
  expect_rejected(init_error_of(c), ErrorCode::kInvalidProgram, {"group_size 32", "48 input channels"});
}

TEST(XnnpackDynamicQuant, ScaleCountMustMatchBlocks) {
  Case c = make_case(1, 64, 4, Weights::kQb4Bf16);
  expect_rejected(init_error_of(c, [](Model& m) { m.scales.pop_back(); }), ErrorCode::kInvalidProgram,
                  {"need 8 scales", "found 7"});
  c.weights = Weights::kQb4Buffer;
  expect_rejected(init_error_of(c, [](Model& m) { m.scales.pop_back(); }), ErrorCode::kInvalidProgram,
                  {"8 blocks need as many bf16 scales"});
}

TEST(XnnpackDynamicQuant, BlockScalesMustBePositive) {
  expect_rejected(init_error_of(make_case(1, 64, 4, Weights::kQb4Bf16), [](Model& m) { m.scales[3] = -1.0f; }),
                  ErrorCode::kInvalidProgram, {"block scale", "not a positive number"});
}

TEST(XnnpackDynamicQuant, OnlyPerTokenQuantizationIsAccepted) {
  Case c;
  c.num_nonbatch_dims = 2;
  expect_rejected(init_error_of(c), ErrorCode::kUnsupportedOperator, {"num_nonbatch_dims 2"});
}

// A qdint8 value converted from fp32 input `x` by a Convert node.
uint32_t converted(PayloadBuilder& b, uint32_t x, std::vector<uint32_t> dims,
                   uint32_t external_id = PayloadBuilder::kNone, uint32_t flags = 0) {
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 1);
  const uint32_t q = b.quantized_with(fbx::Datatype::qdint8, std::move(dims), fbx::QuantParams::PerTokenDynamicQuant,
                                      token.Union(), nullptr, external_id, flags);
  b.unary(NodeUnion::XNNConvert, x, q);
  return q;
}

Error init_error_of(PayloadBuilder& b) { return init_error(b.finish(Layout::kConstantRegion, 2), b); }

// The init error of Convert -> FullyConnected over a per-channel filter of
// `bytes` bytes of `fill`, with unit scales.
Error per_channel_error(std::vector<uint32_t> input, fbx::Datatype type, std::vector<uint32_t> filter,
                        int32_t channel_dim, size_t bytes, uint8_t fill, uint32_t flags = 0) {
  PayloadBuilder b;
  const uint32_t q = converted(b, b.input(input, 0), input);
  const uint32_t out = filter[static_cast<size_t>(channel_dim)];
  const uint32_t w =
      b.channelwise(type, filter, std::vector<float>(out, 1.0f), channel_dim, std::vector<uint8_t>(bytes, fill));
  b.fully_connected(q, w, PayloadBuilder::kNone, b.output({1, out}, 1), flags);
  return init_error_of(b);
}

TEST(XnnpackDynamicQuant, FourBitFilterBytesAreChecked) {
  // A qcint4 [4, 37] filter needs 4 * 19 bytes; give it 4 * 18.
  expect_rejected(per_channel_error({1, 37}, fbx::Datatype::qcint4, {4, 37}, 0, 72, 0x88), ErrorCode::kInvalidProgram,
                  {"needs 76 constant bytes", "qcint4"});
}

TEST(XnnpackDynamicQuant, DynamicValuesStayBetweenConvertAndFullyConnected) {
  {
    PayloadBuilder b;
    converted(b, b.input({1, 8}, 0), {1, 8}, 1, 2);  // an external output
    expect_rejected(init_error_of(b), ErrorCode::kUnsupportedOperator, {"node 0 (XNNConvert)", "external output"});
  }
  {
    PayloadBuilder b;
    const uint32_t q = converted(b, b.input({1, 8}, 0), {1, 8});
    b.unary(NodeUnion::XNNAbs, q, b.output({1, 8}, 1));
    expect_rejected(init_error_of(b), ErrorCode::kUnsupportedOperator, {"node 1 (XNNAbs)", "qdint8"});
  }
}

TEST(XnnpackDynamicQuant, InputRowsMustMatchTheFilter) {
  // XNNPACK would flatten [2, 6] into one row of 12; per-row parameters cannot.
  expect_rejected(per_channel_error({2, 6}, fbx::Datatype::qcint8, {4, 12}, 0, 48, 1), ErrorCode::kInvalidProgram,
                  {"rows of 6 elements", "takes 12"});
}

TEST(XnnpackDynamicQuant, TransposedFourBitFiltersAreRefused) {
  expect_rejected(per_channel_error({1, 8}, fbx::Datatype::qcint4, {8, 4}, 1, 16, 0x88, 1),
                  ErrorCode::kUnsupportedOperator, {"flag 0x1", "qcint8 only"});
}

}  // namespace
}  // namespace etna::test
