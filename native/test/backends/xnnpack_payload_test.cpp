// Malformed and unsupported payloads: every one is an error value naming
// what is wrong, never a crash, at init rather than at execute.
#include <gtest/gtest.h>

#include "backend_test_support.h"
#include "backends/xnnpack/sha256.h"
#include "core/program.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

std::vector<uint8_t> small_graph(Layout layout = Layout::kConstantRegion) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({2, 4}, 0);
  const uint32_t w = builder.constant({3, 4}, pseudo_random(12, 1));
  const uint32_t b = builder.constant({3}, pseudo_random(3, 2));
  const uint32_t f = builder.internal({2, 3});
  const uint32_t t = builder.internal({3, 2});
  const uint32_t y = builder.output({3, 2}, 1);
  builder.fully_connected(x, w, b, f);
  builder.transpose({1, 0}, f, t);
  builder.unary(NodeUnion::XNNClamp, t, y);
  return builder.finish(layout, 2);
}

Error init_error(const std::vector<uint8_t>& payload, const xnn::NamedDataLookup& lookup = {}) {
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, lookup);
  EXPECT_FALSE(delegate) << "payload was accepted";
  return delegate ? Error{ErrorCode::kInternal, ""} : delegate.error();
}

void expect_message(const Error& error, std::initializer_list<const char*> parts) {
  for (const char* part : parts) {
    EXPECT_NE(error.message.find(part), std::string::npos) << "'" << part << "' not in: " << error.message;
  }
}

// Initialises, and if that succeeds runs with buffers of the declared shapes:
// whatever the bytes say, the delegate must answer with a value.
void init_and_maybe_run(ByteSpan payload) {
  auto parsed = xnn::parse_payload(payload, {});
  if (!parsed) return;
  std::vector<std::unique_ptr<LocalTensor>> tensors(parsed->graph.num_externs);
  for (const xnn::Value& value : parsed->graph.values) {
    if (!value.is_input && !value.is_output) continue;
    if (value.datatype != fbx::Datatype::fp32 || value.shape.numel() > (1u << 16)) return;
    std::vector<int64_t> sizes(value.shape.dims.begin(), value.shape.dims.begin() + value.shape.rank);
    tensors[value.external_id] = std::make_unique<LocalTensor>(ScalarType::kFloat, sizes);
  }
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context);
  if (!delegate) {
    EXPECT_FALSE(delegate.error().message.empty());
    return;
  }
  std::vector<LocalTensor*> args;
  for (auto& t : tensors) {
    if (!t) return;  // an external id no value uses: nothing to bind
    args.push_back(t.get());
  }
  Status status = run_delegate(**delegate, args);
  if (!status) {
    EXPECT_FALSE(status.error().message.empty());
  }
}

TEST(XnnpackPayload, Sha256KnownAnswers) {
  EXPECT_EQ(xnn::sha256_hex(nullptr, 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string abc = "abc";
  EXPECT_EQ(xnn::sha256_hex(reinterpret_cast<const uint8_t*>(abc.data()), abc.size()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(xnn::sha256_hex(reinterpret_cast<const uint8_t*>(two_blocks.data()), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(XnnpackPayload, HeaderFieldsAreChecked) {
  const auto good = small_graph();
  {
    auto p = good;
    p.resize(20);
    expect_message(init_error(p), {"shorter than its 30-byte XH00 header"});
  }
  {
    auto p = good;
    PayloadBuilder::put(p, 8, 12, 2);
    expect_message(init_error(p), {"header_length 12"});
  }
  {
    auto p = good;
    PayloadBuilder::put(p, 14, 4, 4);
    expect_message(init_error(p), {"flatbuffer_size 4"});
  }
  {
    auto p = good;
    PayloadBuilder::put(p, 10, 0xFFFFFFF0u, 4);
    expect_message(init_error(p), {"graph bytes", "exceed"});
  }
  {
    auto p = good;
    PayloadBuilder::put(p, 22, UINT64_MAX - 3, 8);  // offset + size overflows 64 bits
    expect_message(init_error(p), {"constant bytes", "exceed"});
  }
  {
    auto p = good;
    PayloadBuilder::put(p, 18, 40, 4);
    PayloadBuilder::put(p, 22, 0, 8);
    expect_message(init_error(p), {"overlaps the graph"});
  }
  {
    auto p = good;
    std::memcpy(p.data() + 32 + 4, "XN99", 4);
    expect_message(init_error(p), {"identifier is 'XN99'"});
  }
  {
    std::vector<uint8_t> tiny = {1, 2, 3};
    expect_message(init_error(tiny), {"3 bytes"});
  }
  {
    // A longer header (fields appended by a newer writer) is accepted.
    auto p = good;
    PayloadBuilder::put(p, 8, 32, 2);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(p, context);
    EXPECT_TRUE(delegate) << delegate.error().message;
  }
}

TEST(XnnpackPayload, BothIdentifiersAreAccepted) {
  for (const char* identifier : {"XN00", "XN01"}) {
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 0);
    const uint32_t y = builder.output({3}, 1);
    builder.unary(NodeUnion::XNNAbs, x, y);
    auto payload = builder.finish(Layout::kConstantRegion, 2, identifier);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context);
    EXPECT_TRUE(delegate) << identifier << ": " << delegate.error().message;
  }
}

TEST(XnnpackPayload, EveryTruncationIsAnError) {
  for (Layout layout : {Layout::kConstantRegion, Layout::kLegacy}) {
    const auto payload = small_graph(layout);
    for (size_t length = 0; length < payload.size(); ++length) {
      std::vector<uint8_t> cut(payload.begin(), payload.begin() + length);
      xnn::XnnpackModuleContext context(BackendOptions{});
      auto delegate = make_delegate(cut, context);
      ASSERT_FALSE(delegate) << "truncated to " << length << " of " << payload.size() << " bytes was accepted";
      EXPECT_FALSE(delegate.error().message.empty());
    }
  }
}

TEST(XnnpackPayload, CorruptionAtAnyByteNeverCrashes) {
  for (Layout layout : {Layout::kConstantRegion, Layout::kLegacy}) {
    const auto payload = small_graph(layout);
    size_t rejected = 0, runs = 0;
    for (size_t position = 0; position < payload.size(); ++position) {
      for (uint8_t value : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x7F}, uint8_t(payload[position] ^ 0x01)}) {
        if (value == payload[position]) continue;
        auto corrupt = payload;
        corrupt[position] = value;
        ++runs;
        xnn::XnnpackModuleContext context(BackendOptions{});
        auto delegate = make_delegate(corrupt, context);
        if (!delegate) {
          ++rejected;
          EXPECT_FALSE(delegate.error().message.empty());
        }
        init_and_maybe_run(ByteSpan{corrupt.data(), corrupt.size()});
      }
    }
    // Most bytes are structure (offsets, ids, types), so most corruptions are caught.
    EXPECT_GT(rejected, runs / 3) << rejected << " of " << runs;
  }
}

TEST(XnnpackPayload, RealPayloadsTruncatedOrCorrupted) {
  ETNA_REQUIRE_TESTDATA();
  for (const char* file : {"djl_conv_xnnpack.pte", "djl_lin129_planned.pte", "npr_add_xnnpack.pte"}) {
    auto program = Program::load_file(testdata_dir() + "/" + file);
    ASSERT_TRUE(program) << program.error().message;
    const pte::ExecutionPlan& plan = (*program)->method(0);
    const ByteSpan span = (*program)->delegate_payload(*plan.delegates()->Get(0));
    const std::vector<uint8_t> payload(span.data, span.data + span.size);
    const Program& p = **program;
    xnn::NamedDataLookup lookup = [&p](std::string_view key) { return p.named_data(key); };
    for (size_t length = 0; length < payload.size(); length += 7) {
      std::vector<uint8_t> cut(payload.begin(), payload.begin() + length);
      xnn::XnnpackModuleContext context(BackendOptions{});
      auto delegate = make_delegate(cut, context, lookup);
      EXPECT_FALSE(delegate) << file << " truncated to " << length << " bytes was accepted";
    }
    for (size_t position = 0; position < payload.size(); ++position) {
      auto corrupt = payload;
      corrupt[position] ^= 0xA5;
      init_and_maybe_run(ByteSpan{corrupt.data(), corrupt.size()});
    }
  }
}

TEST(XnnpackPayload, UnknownNodeTypeNamesNodeAndCode) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({3}, 0);
  const uint32_t y = builder.output({3}, 1);
  builder.unary(NodeUnion::XNNAbs, x, y);
  builder.node(static_cast<NodeUnion>(93), fbx::CreateUnary(builder.fbb(), x, y, 0).Union());
  const Error error = init_error(builder.finish(Layout::kConstantRegion, 2));
  EXPECT_EQ(error.code, ErrorCode::kUnsupportedOperator);
  expect_message(error, {"node 1", "unknown node type code 93"});
}

TEST(XnnpackPayload, UnknownValueTypeNamesEntryAndCode) {
  // A graph whose second value has a union type code past the known ones.
  flatbuffers::FlatBufferBuilder raw;
  auto dims = raw.CreateVector(std::vector<uint32_t>{3});
  auto good_tensor = fbx::CreateTensorValue(raw, fbx::Datatype::fp32, 1, dims, 0, 0, 1, 0);
  auto good_value = fbx::CreateValue(raw, fbx::ValueUnion::TensorValue, good_tensor.Union());
  auto strange = fbx::CreateUnary(raw, 0, 0, 0);
  fbx::ValueBuilder strange_value(raw);
  strange_value.add_value_type(static_cast<fbx::ValueUnion>(7));
  strange_value.add_value(strange.Union());
  auto strange_offset = strange_value.Finish();
  auto values = raw.CreateVector(std::vector<flatbuffers::Offset<fbx::Value>>{good_value, strange_offset});
  auto graph = fbx::CreateGraph(raw, 0, 0, values, 1);
  raw.Finish(graph, "XN01");
  std::vector<uint8_t> payload(raw.GetBufferPointer(), raw.GetBufferPointer() + raw.GetSize());
  const Error error = init_error(payload);
  EXPECT_EQ(error.code, ErrorCode::kUnsupportedOperator);
  expect_message(error, {"value entry 1", "unknown value type code 7"});
}

TEST(XnnpackPayload, DatatypeTheLibraryCannotRunNamesNodeAndDatatype) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({2, 4}, 0);
  const std::vector<float> packed(2, 0.0f);  // 16 nibbles
  const uint32_t w = builder.tensor(fbx::Datatype::qcint4, {4, 4}, PayloadBuilder::kNone, 0, &packed);
  const uint32_t y = builder.output({2, 4}, 1);
  builder.fully_connected(x, w, PayloadBuilder::kNone, y);
  const Error error = init_error(builder.finish(Layout::kConstantRegion, 2));
  EXPECT_EQ(error.code, ErrorCode::kUnsupportedOperator);
  expect_message(error, {"node 0 (XNNFullyConnected)", "qcint4"});
}

TEST(XnnpackPayload, QuantizedDatatypeWithoutParametersIsRejected) {
  PayloadBuilder builder;
  const uint32_t x = builder.tensor(fbx::Datatype::qint8, {4}, 0, 1);
  const uint32_t y = builder.tensor(fbx::Datatype::qint8, {4}, 1, 2);
  builder.unary(NodeUnion::XNNTanh, x, y);
  const Error error = init_error(builder.finish(Layout::kConstantRegion, 2));
  // Tanh exists only as etna's fp32 kernel here.
  expect_message(error, {"node 0 (XNNTanh)", "qint8", "fp32"});
}

TEST(XnnpackPayload, AttentionIsRejectedAtInit) {
  PayloadBuilder builder;
  const uint32_t q = builder.input({1, 2, 4}, 0);
  const uint32_t s = builder.input({1}, 1);
  const uint32_t o = builder.output({1, 2, 4}, 2);
  builder.node(NodeUnion::XNNScaledDotProductAttention,
               fbx::CreateScaledDotProductAttention(builder.fbb(), q, q, q, s, PayloadBuilder::kNone, o, 0).Union());
  const Error error = init_error(builder.finish(Layout::kConstantRegion, 3));
  expect_message(error, {"node 0 (XNNScaledDotProductAttention)", "not implemented"});
}

TEST(XnnpackPayload, SemanticErrorsNameTheirSubject) {
  {
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 0);
    const uint32_t y = builder.output({3}, 1);
    builder.unary(NodeUnion::XNNAbs, x + 40, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)),
                   {"node 0 (XNNAbs)", "input_id 40 names no value"});
  }
  {
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 0);
    const uint32_t t = builder.internal({3});
    const uint32_t y = builder.output({3}, 1);
    builder.unary(NodeUnion::XNNAbs, t, y);  // t is produced later
    builder.unary(NodeUnion::XNNNegate, x, t);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)), {"node 0 (XNNAbs)", "used before"});
  }
  {
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 5);
    const uint32_t y = builder.output({3}, 1);
    builder.unary(NodeUnion::XNNAbs, x, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)), {"external_id 5"});
  }
  {
    PayloadBuilder builder;
    const uint32_t x = builder.tensor(fbx::Datatype::fp32, {3}, 0, 4);
    const uint32_t y = builder.output({3}, 1);
    builder.unary(NodeUnion::XNNAbs, x, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)), {"flags 0x4"});
  }
  {
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 0);
    const uint32_t y = builder.output({3}, 1);
    builder.output({3}, 2);  // never produced
    builder.unary(NodeUnion::XNNAbs, x, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 3)), {"value 2", "produced by no node"});
  }
  {
    // Named constant whose key the program lacks.
    PayloadBuilder builder;
    const uint32_t x = builder.input({3}, 0);
    const uint32_t c = builder.constant({3}, {1, 2, 3});
    const uint32_t y = builder.output({3}, 1);
    builder.binary(NodeUnion::XNNAdd, x, c, y);
    auto payload = builder.finish(Layout::kNamedData, 2);
    xnn::NamedDataLookup nothing = [](std::string_view) { return std::optional<ByteSpan>(); };
    expect_message(init_error(payload, nothing), {"const1", "named data lacks"});
  }
  {
    // Constant shorter than its tensor.
    PayloadBuilder builder;
    const uint32_t x = builder.input({4}, 0);
    const std::vector<float> three = {1, 2, 3};
    const uint32_t c = builder.tensor(fbx::Datatype::fp32, {4}, PayloadBuilder::kNone, 0, &three);
    const uint32_t y = builder.output({4}, 1);
    builder.binary(NodeUnion::XNNAdd, x, c, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)), {"needs 16 constant bytes", "has 12"});
  }
  {
    // Declared output shape disagreeing with the inputs.
    PayloadBuilder builder;
    const uint32_t x = builder.input({2, 3}, 0);
    const uint32_t y = builder.output({3, 3}, 1);
    builder.transpose({1, 0}, x, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)),
                   {"node 0 (XNNStaticTranspose)", "declared [3, 3]", "[3, 2]"});
  }
  {
    // Filter that is not a constant cannot be packed.
    PayloadBuilder builder;
    const uint32_t x = builder.input({2, 4}, 0);
    const uint32_t w = builder.input({3, 4}, 1);
    const uint32_t y = builder.output({2, 3}, 2);
    builder.fully_connected(x, w, PayloadBuilder::kNone, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 3)),
                   {"node 0 (XNNFullyConnected)", "filter", "constant"});
  }
  {
    // Rank above XNNPACK's limit.
    PayloadBuilder builder;
    const uint32_t x = builder.input({1, 1, 1, 1, 1, 1, 2}, 0);
    const uint32_t y = builder.output({1, 1, 1, 1, 1, 1, 2}, 1);
    builder.unary(NodeUnion::XNNAbs, x, y);
    expect_message(init_error(builder.finish(Layout::kConstantRegion, 2)), {"rank 7"});
  }
}

}  // namespace
}  // namespace etna::test
