// Payloads built here with the generated FlatBuffers builder, covering
// graphs that mix XNNPACK subgraph stages, shared packed operators and
// etna kernels, the three constant layouts, and dynamic input shapes.
#include <gtest/gtest.h>

#include "backend_test_support.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

// x [2, 3, 4] -> transpose [0, 2, 1] -> t [2, 4, 3]
//   a = clamp(t + c, -1.5, 1.5)   (subgraph; c [3] broadcast)
//   h = tanh(a)                   (etna kernel)
//   s = sigmoid(t)                (subgraph)
//   cat = concat(h, s, axis 2)    (etna kernel) [2, 4, 6]
//   f = cat @ w^T + b             (packed FC, w [5, 6]) -> output 2, also read below
//   sl = f[:, 1:3, :]             (etna kernel) [2, 2, 5]
//   out = sl * sl                 (subgraph) -> output 1
struct MixedGraph {
  std::vector<float> c = {0.5f, -1.0f, 2.0f};
  std::vector<float> w = pseudo_random(5 * 6, 3, 0.7f);
  std::vector<float> b = pseudo_random(5, 4, 0.3f);

  std::vector<uint8_t> build(Layout layout, PayloadBuilder& builder, const char* identifier = "XN01") const {
    const uint32_t x = builder.input({2, 3, 4}, 0);
    const uint32_t cc = builder.constant({3}, c);
    const uint32_t ww = builder.constant({5, 6}, w);
    const uint32_t bb = builder.constant({5}, b);
    const uint32_t t = builder.internal({2, 4, 3});
    const uint32_t a = builder.internal({2, 4, 3});
    const uint32_t h = builder.internal({2, 4, 3});
    const uint32_t s = builder.internal({2, 4, 3});
    const uint32_t cat = builder.internal({2, 4, 6});
    const uint32_t f = builder.output({2, 4, 5}, 2);
    const uint32_t sl = builder.internal({2, 2, 5});
    const uint32_t out = builder.output({2, 2, 5}, 1);
    builder.transpose({0, 2, 1}, x, t);
    builder.binary(NodeUnion::XNNAdd, t, cc, a, std::make_pair(-1.5f, 1.5f));
    builder.unary(NodeUnion::XNNTanh, a, h);
    builder.unary(NodeUnion::XNNSigmoid, t, s);
    builder.concatenate(2, {h, s}, cat);
    builder.fully_connected(cat, ww, bb, f);
    builder.slice({0, 1, 0}, {2, 2, 5}, f, sl);
    builder.binary(NodeUnion::XNNMultiply, sl, sl, out);
    return builder.finish(layout, 3, identifier);
  }

  // Returns {out, f}.
  std::pair<std::vector<float>, std::vector<float>> reference(const std::vector<float>& x) const {
    std::vector<float> cat(2 * 4 * 6);
    for (size_t n = 0; n < 2; ++n) {
      for (size_t i = 0; i < 4; ++i) {
        for (size_t j = 0; j < 3; ++j) {
          const float t = x[(n * 3 + j) * 4 + i];
          const float a = std::min(1.5f, std::max(-1.5f, t + c[j]));
          cat[(n * 4 + i) * 6 + j] = std::tanh(a);
          cat[(n * 4 + i) * 6 + 3 + j] = 1.0f / (1.0f + std::exp(-t));
        }
      }
    }
    std::vector<float> f(2 * 4 * 5);
    for (size_t row = 0; row < 8; ++row) {
      for (size_t o = 0; o < 5; ++o) {
        double sum = b[o];
        for (size_t k = 0; k < 6; ++k) sum += double(cat[row * 6 + k]) * w[o * 6 + k];
        f[row * 5 + o] = static_cast<float>(sum);
      }
    }
    std::vector<float> out(2 * 2 * 5);
    for (size_t n = 0; n < 2; ++n) {
      for (size_t i = 0; i < 2; ++i) {
        for (size_t o = 0; o < 5; ++o) {
          const float v = f[(n * 4 + 1 + i) * 5 + o];
          out[(n * 2 + i) * 5 + o] = v * v;
        }
      }
    }
    return {out, f};
  }
};

void run_mixed(Layout layout, size_t input_slack, size_t payload_shift = 0, const char* identifier = "XN01") {
  MixedGraph graph;
  PayloadBuilder builder;
  const std::vector<uint8_t> payload = graph.build(layout, builder, identifier);
  // Optionally place the payload at an odd address to exercise the aligned copy.
  std::vector<uint8_t> holder(payload.size() + payload_shift);
  std::memcpy(holder.data() + payload_shift, payload.data(), payload.size());

  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(ByteSpan{holder.data() + payload_shift, payload.size()}, context, builder.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  for (uint32_t round = 0; round < 3; ++round) {
    LocalTensor x(ScalarType::kFloat, {2, 3, 4}, input_slack);
    LocalTensor out(ScalarType::kFloat, {2, 2, 5});
    LocalTensor f(ScalarType::kFloat, {2, 4, 5});
    const auto input = pseudo_random(24, 100 + round, 2.0f);
    x.fill(input);
    Status status = run_delegate(**delegate, {&x, &out, &f});
    ASSERT_TRUE(status) << status.error().message;
    const auto expected = graph.reference(input);
    EXPECT_TRUE(close_to(out.to_vector(), expected.first)) << "out, round " << round;
    EXPECT_TRUE(close_to(f.to_vector(), expected.second)) << "f, round " << round;
  }
}

TEST(XnnpackStages, MixedGraphWithConstantRegion) { run_mixed(Layout::kConstantRegion, 64); }
TEST(XnnpackStages, MixedGraphWithNamedData) { run_mixed(Layout::kNamedData, 64); }
TEST(XnnpackStages, MixedGraphLegacyHeaderless) { run_mixed(Layout::kLegacy, 64, 0, "XN00"); }
TEST(XnnpackStages, MixedGraphUnpaddedInputIsStaged) { run_mixed(Layout::kConstantRegion, 0); }
TEST(XnnpackStages, MixedGraphMisalignedPayload) { run_mixed(Layout::kConstantRegion, 64, 1); }
TEST(XnnpackStages, MixedGraphMisalignedLegacyPayload) { run_mixed(Layout::kLegacy, 64, 3); }

TEST(XnnpackStages, StagesAreSplitByEngine) {
  MixedGraph graph;
  PayloadBuilder builder;
  auto payload = graph.build(Layout::kConstantRegion, builder);
  auto parsed = xnn::parse_payload(ByteSpan{payload.data(), payload.size()}, {});
  ASSERT_TRUE(parsed) << parsed.error().message;
  const auto& nodes = parsed->graph.nodes;
  ASSERT_EQ(nodes.size(), 8u);
  const xnn::Engine expected[] = {xnn::Engine::kEtnaKernel, xnn::Engine::kSubgraph,   xnn::Engine::kEtnaKernel,
                                  xnn::Engine::kSubgraph,   xnn::Engine::kEtnaKernel, xnn::Engine::kPackedOperator,
                                  xnn::Engine::kEtnaKernel, xnn::Engine::kSubgraph};
  for (size_t i = 0; i < nodes.size(); ++i) EXPECT_EQ(xnn::engine_for(nodes[i].type), expected[i]) << "node " << i;
}

// The node-type table names every wire code as the schema does, and only
// subgraph rows define while only etna-kernel rows run.
TEST(XnnpackStages, NodeTypeRowsMatchTheSchema) {
  for (uint8_t code = 1; code <= xnn::kLastNodeType; ++code) {
    const xnn::NodeTypeInfo& row = xnn::node_type_info(static_cast<xnn::NodeType>(code));
    EXPECT_EQ(static_cast<uint8_t>(row.type), code);
    EXPECT_STREQ(row.name, fbx::EnumNameNodeUnion(static_cast<NodeUnion>(code))) << "code " << int(code);
    EXPECT_EQ(row.define != nullptr, row.engine == xnn::Engine::kSubgraph) << row.name;
    EXPECT_EQ(row.define_name != nullptr, row.define != nullptr) << row.name;
    const bool rejected = row.datatypes == xnn::DatatypeRule::kUnsupported;
    const bool runs_etna_kernel =
        (row.engine == xnn::Engine::kEtnaKernel && !rejected) || row.etna_kernel_when != nullptr;
    EXPECT_EQ(row.run != nullptr, runs_etna_kernel) << row.name;
    EXPECT_EQ(row.shape == nullptr, rejected) << row.name;
  }
  EXPECT_EQ(xnn::node_type_name(0), "code 0");
  EXPECT_EQ(xnn::node_type_name(xnn::kLastNodeType + 1), "code " + std::to_string(xnn::kLastNodeType + 1));
}

// Elementwise etna kernels against the C library, plus both batch-matmul layouts.
TEST(XnnpackStages, OwnMathKernelsAndBatchMatmul) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({4, 5}, 0);
  const NodeUnion unary_types[] = {NodeUnion::XNNReciprocalSquareRoot,
                                   NodeUnion::XNNLog,
                                   NodeUnion::XNNGelu,
                                   NodeUnion::XNNExp,
                                   NodeUnion::XNNSin,
                                   NodeUnion::XNNCos,
                                   NodeUnion::XNNCopy,
                                   NodeUnion::XNNTanh};
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < 8; ++i) outs.push_back(builder.output({4, 5}, static_cast<uint32_t>(1 + i)));
  const uint32_t a = builder.input({2, 3, 4}, 9);
  const uint32_t bm = builder.input({2, 4, 5}, 10);
  const uint32_t bt = builder.input({2, 5, 4}, 11);
  const uint32_t mm = builder.output({2, 3, 5}, 12);
  const uint32_t mt = builder.output({2, 3, 5}, 13);
  for (size_t i = 0; i < 8; ++i) builder.unary(unary_types[i], x, outs[i]);
  builder.binary(NodeUnion::XNNBatchMatrixMultiply, a, bm, mm);
  builder.binary(NodeUnion::XNNBatchMatrixMultiply, a, bt, mt, {}, 0x1);
  auto payload = builder.finish(Layout::kConstantRegion, 14);

  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  ASSERT_TRUE(delegate) << delegate.error().message;

  std::vector<std::unique_ptr<LocalTensor>> tensors;
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{4, 5}));
  for (size_t i = 0; i < 8; ++i) {
    tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{4, 5}));
  }
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{2, 3, 4}));
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{2, 4, 5}));
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{2, 5, 4}));
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{2, 3, 5}));
  tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{2, 3, 5}));

  std::vector<float> input = pseudo_random(20, 5, 2.0f);
  for (float& v : input) v = std::fabs(v) + 0.25f;  // log and rsqrt need positive inputs
  tensors[0]->fill(input);
  const auto av = pseudo_random(24, 6), bv = pseudo_random(40, 7), btv = pseudo_random(40, 8);
  tensors[9]->fill(av);
  tensors[10]->fill(bv);
  tensors[11]->fill(btv);

  std::vector<LocalTensor*> args;
  for (auto& t : tensors) args.push_back(t.get());
  Status status = run_delegate(**delegate, args);
  ASSERT_TRUE(status) << status.error().message;

  float (*const functions[])(float) = {
      [](float v) { return 1.0f / std::sqrt(v); },
      [](float v) { return std::log(v); },
      [](float v) { return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))); },
      [](float v) { return std::exp(v); },
      [](float v) { return std::sin(v); },
      [](float v) { return std::cos(v); },
      [](float v) { return v; },
      [](float v) { return std::tanh(v); },
  };
  for (size_t k = 0; k < 8; ++k) {
    std::vector<float> expected(20);
    for (size_t i = 0; i < 20; ++i) expected[i] = functions[k](input[i]);
    EXPECT_TRUE(close_to(tensors[1 + k]->to_vector(), expected)) << "unary kernel " << k;
  }
  std::vector<float> expected_mm(30), expected_mt(30);
  for (size_t n = 0; n < 2; ++n) {
    for (size_t i = 0; i < 3; ++i) {
      for (size_t j = 0; j < 5; ++j) {
        double sum = 0, sum_t = 0;
        for (size_t k = 0; k < 4; ++k) {
          sum += double(av[(n * 3 + i) * 4 + k]) * bv[(n * 4 + k) * 5 + j];
          sum_t += double(av[(n * 3 + i) * 4 + k]) * btv[(n * 5 + j) * 4 + k];
        }
        expected_mm[(n * 3 + i) * 5 + j] = static_cast<float>(sum);
        expected_mt[(n * 3 + i) * 5 + j] = static_cast<float>(sum_t);
      }
    }
  }
  EXPECT_TRUE(close_to(tensors[12]->to_vector(), expected_mm));
  EXPECT_TRUE(close_to(tensors[13]->to_vector(), expected_mt));
}

// Reshape and 3-input concatenation move bytes of any element type.
TEST(XnnpackStages, ReshapeAndConcatenateThree) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({2, 6}, 0);
  const uint32_t y = builder.input({2, 3, 1}, 1);
  const uint32_t r = builder.internal({2, 3, 2});
  const uint32_t out = builder.output({2, 3, 5}, 2);
  builder.reshape({2, 3, 2}, x, r);
  builder.concatenate(2, {r, y, r}, out);
  auto payload = builder.finish(Layout::kConstantRegion, 3);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor xt(ScalarType::kFloat, {2, 6}), yt(ScalarType::kFloat, {2, 3, 1}), ot(ScalarType::kFloat, {2, 3, 5});
  const auto xv = pseudo_random(12, 1), yv = pseudo_random(6, 2);
  xt.fill(xv);
  yt.fill(yv);
  Status status = run_delegate(**delegate, {&xt, &yt, &ot});
  ASSERT_TRUE(status) << status.error().message;
  std::vector<float> expected;
  for (size_t row = 0; row < 6; ++row) {
    expected.push_back(xv[row * 2]);
    expected.push_back(xv[row * 2 + 1]);
    expected.push_back(yv[row]);
    expected.push_back(xv[row * 2]);
    expected.push_back(xv[row * 2 + 1]);
  }
  EXPECT_TRUE(close_to(ot.to_vector(), expected));
}

// x [B, 6] with B <= 4 declared as 4: y = tanh(FC(x + c)).
std::vector<uint8_t> dynamic_graph(PayloadBuilder& builder, const std::vector<float>& c, const std::vector<float>& w) {
  const uint32_t x = builder.input({4, 6}, 0);
  const uint32_t cc = builder.constant({6}, c);
  const uint32_t ww = builder.constant({3, 6}, w);
  const uint32_t shifted = builder.internal({4, 6});
  const uint32_t fc = builder.internal({4, 3});
  const uint32_t y = builder.output({4, 3}, 1);
  builder.binary(NodeUnion::XNNAdd, x, cc, shifted);
  builder.fully_connected(shifted, ww, PayloadBuilder::kNone, fc);
  builder.unary(NodeUnion::XNNTanh, fc, y);
  return builder.finish(Layout::kConstantRegion, 2);
}

TEST(XnnpackStages, DynamicBatchRunsAtActualShapeWithoutRepacking) {
  const auto c = pseudo_random(6, 11), w = pseudo_random(18, 12);
  PayloadBuilder builder;
  auto payload = dynamic_graph(builder, c, w);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  ASSERT_TRUE(delegate) << delegate.error().message;

  LocalTensor x(ScalarType::kFloat, {4, 6}, 0, ShapeDynamism::kBound);
  LocalTensor y(ScalarType::kFloat, {4, 3}, 0, ShapeDynamism::kBound);
  for (int64_t batch : {4, 2, 1, 2, 4}) {
    std::vector<float> input;
    ASSERT_NO_FATAL_FAILURE(run_resized(**delegate, x, y, {batch, 6}, 40 + uint32_t(batch), input));
    ASSERT_EQ(y.tensor().size(0), batch);
    ASSERT_EQ(y.tensor().size(1), 3);
    std::vector<float> expected(size_t(batch) * 3);
    for (int64_t r = 0; r < batch; ++r) {
      for (size_t o = 0; o < 3; ++o) {
        double sum = 0;
        for (size_t k = 0; k < 6; ++k) sum += (double(input[r * 6 + k]) + c[k]) * w[o * 6 + k];
        expected[r * 3 + o] = static_cast<float>(std::tanh(sum));
      }
    }
    EXPECT_TRUE(close_to(y.to_vector(), expected)) << "batch " << batch;
  }
  EXPECT_EQ((*delegate)->cached_plans(), 3u);  // declared [4, 6] plus [2, 6] and [1, 6]
  auto stats = context.stats();
  EXPECT_EQ(stats.operators_created, 1u);
  EXPECT_EQ(stats.packed_operators, 1u);
}

TEST(XnnpackStages, ShapeThatBreaksTheGraphIsAnInputError) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({4, 6}, 0);
  const uint32_t w = builder.constant({3, 6}, pseudo_random(18, 1));
  const uint32_t y = builder.output({4, 3}, 1);
  builder.fully_connected(x, w, PayloadBuilder::kNone, y);
  auto payload = builder.finish(Layout::kConstantRegion, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor x_tensor(ScalarType::kFloat, {4, 6}, 0, ShapeDynamism::kBound, 64);
  LocalTensor y_tensor(ScalarType::kFloat, {4, 3}, 0, ShapeDynamism::kBound);
  const int64_t wrong[] = {4, 5};  // 5 input channels, the filter has 6
  ASSERT_TRUE(x_tensor.tensor().resize(2, wrong));
  Status status = run_delegate(**delegate, {&x_tensor, &y_tensor});
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(status.error().message.find("node 0 (XNNFullyConnected)"), std::string::npos) << status.error().message;
}

TEST(XnnpackStages, WrongArgumentsAreReportedNotRun) {
  PayloadBuilder builder;
  auto payload = dynamic_graph(builder, pseudo_random(6, 1), pseudo_random(18, 2));
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor x(ScalarType::kFloat, {4, 6}), y(ScalarType::kFloat, {4, 3});
  LocalTensor ints(ScalarType::kInt, {4, 6});
  LocalTensor rank3(ScalarType::kFloat, {1, 4, 6});

  Status too_few = run_delegate(**delegate, {&x});
  ASSERT_FALSE(too_few);
  EXPECT_NE(too_few.error().message.find("1 arguments"), std::string::npos) << too_few.error().message;

  Status wrong_dtype = run_delegate(**delegate, {&ints, &y});
  ASSERT_FALSE(wrong_dtype);
  EXPECT_NE(wrong_dtype.error().message.find("arg 0"), std::string::npos) << wrong_dtype.error().message;
  EXPECT_NE(wrong_dtype.error().message.find("int32"), std::string::npos) << wrong_dtype.error().message;

  Status wrong_rank = run_delegate(**delegate, {&rank3, &y});
  ASSERT_FALSE(wrong_rank);
  EXPECT_NE(wrong_rank.error().message.find("rank"), std::string::npos) << wrong_rank.error().message;

  EValue none = EValue::none();
  std::vector<EValue*> args = {&none, y.value()};
  Status not_tensor = (*delegate)->execute(args.data(), args.size());
  ASSERT_FALSE(not_tensor);
  EXPECT_NE(not_tensor.error().message.find("not a tensor"), std::string::npos) << not_tensor.error().message;

  // A static output cannot take a different shape.
  LocalTensor static_x(ScalarType::kFloat, {4, 6}, 0, ShapeDynamism::kBound);
  const int64_t two[] = {2, 6};
  ASSERT_TRUE(static_x.tensor().resize(2, two));
  Status static_output = run_delegate(**delegate, {&static_x, &y});
  ASSERT_FALSE(static_output);
  EXPECT_NE(static_output.error().message.find("arg 1"), std::string::npos) << static_output.error().message;

  // An input buffer smaller than its shape.
  LocalTensor short_x(ScalarType::kFloat, {4, 6});
  short_x.tensor().set_data(short_x.tensor().data(), 4 * 6 * sizeof(float) - 4);
  Status short_input = run_delegate(**delegate, {&short_x, &y});
  ASSERT_FALSE(short_input);
  EXPECT_NE(short_input.error().message.find("needs 96"), std::string::npos) << short_input.error().message;

  // After all that, a correct call still works.
  x.fill(pseudo_random(24, 3));
  Status ok = run_delegate(**delegate, {&x, &y});
  EXPECT_TRUE(ok) << ok.error().message;
}

}  // namespace
}  // namespace etna::test
