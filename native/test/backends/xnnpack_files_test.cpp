// The XNNPACK delegate on real exported programs: every XnnpackBackend payload
// in the test data is initialised through find_backend, run over local
// buffers, and compared with a reference computed here from the file's own
// weights.
#include <gtest/gtest.h>

#include <functional>

#include "backend_test_support.h"
#include "backends/registry.h"
#include "backends/xnnpack/sha256.h"
#include "backends/xnnpack/xnnpack_backend.h"
#include "core/backend.h"
#include "core/program.h"

namespace etna::test {
namespace {

// A program's first method with its single DelegateCall.
struct DelegatedMethod {
  std::shared_ptr<const Program> program;
  const pte::ExecutionPlan* plan = nullptr;
  const pte::BackendDelegate* delegate = nullptr;
  ByteSpan payload;
  std::vector<int32_t> args;

  const fbx::Graph& graph() const {
    const uint8_t* fb = payload.data;
    if (payload.size >= 8 && std::memcmp(payload.data + 4, "XH00", 4) == 0) {
      uint32_t offset = 0;
      std::memcpy(&offset, payload.data + 10, 4);
      fb += offset;
    }
    return *flatbuffers::GetRoot<fbx::Graph>(fb);
  }

  // Bytes of a constant value, looked up by its named-data key.
  std::vector<float> named_constant(uint32_t value_id) const {
    const fbx::Graph& g = graph();
    for (const fbx::Value* value : *g.values()) {
      const fbx::TensorValue* tensor = value->value_as_TensorValue();
      if (!tensor || tensor->id_out() != value_id) continue;
      const fbx::ConstantDataOffset* entry = g.constant_data()->Get(tensor->constant_buffer_idx());
      auto bytes = program->named_data(entry->named_key()->str());
      EXPECT_TRUE(bytes.has_value()) << "named data " << entry->named_key()->str();
      return bytes ? floats_from(*bytes) : std::vector<float>{};
    }
    ADD_FAILURE() << "no value with id " << value_id;
    return {};
  }

  // Local tensors shaped like the method's values the call passes.
  std::vector<std::unique_ptr<LocalTensor>> make_args(size_t slack) const {
    std::vector<std::unique_ptr<LocalTensor>> tensors;
    for (int32_t index : args) {
      const pte::Tensor* t = plan->values()->Get(index)->val_as_Tensor();
      std::vector<int64_t> sizes(t->sizes()->begin(), t->sizes()->end());
      tensors.push_back(std::make_unique<LocalTensor>(static_cast<ScalarType>(t->scalar_type()), sizes, slack));
    }
    return tensors;
  }
};

DelegatedMethod load_method(const std::string& file) {
  DelegatedMethod method;
  auto program = Program::load_file(testdata_dir() + "/" + file);
  EXPECT_TRUE(program) << (program ? "" : program.error().message);
  if (!program) return method;
  method.program = *program;
  method.plan = &method.program->method(0);
  for (const pte::Instruction* instruction : *method.plan->chains()->Get(0)->instructions()) {
    if (const pte::DelegateCall* call = instruction->instr_args_as_DelegateCall()) {
      method.delegate = method.plan->delegates()->Get(call->delegate_index());
      method.args.assign(call->args()->begin(), call->args()->end());
    }
  }
  EXPECT_NE(method.delegate, nullptr) << file << " has no DelegateCall";
  if (method.delegate) method.payload = method.program->delegate_payload(*method.delegate);
  return method;
}

struct InitializedDelegate {
  std::unique_ptr<BackendModuleContext> context;
  std::unique_ptr<DelegateHandle> handle;
};

InitializedDelegate init_delegate(const DelegatedMethod& method, BackendOptions options = {}) {
  InitializedDelegate result;
  const Backend* backend = find_backend(method.delegate->id()->str());
  EXPECT_NE(backend, nullptr) << "no backend " << method.delegate->id()->str();
  if (!backend) return result;
  result.context = backend->create_module_context(options);
  DelegateInitContext context{*method.program, result.context.get(), method.plan->name()->str(), 0};
  auto handle = backend->init(method.payload, {}, context);
  EXPECT_TRUE(handle) << (handle ? "" : handle.error().message);
  if (handle) result.handle = std::move(*handle);
  return result;
}

Status execute(DelegateHandle& handle, std::vector<std::unique_ptr<LocalTensor>>& tensors) {
  std::vector<EValue*> args;
  for (auto& t : tensors) args.push_back(t->value());
  return handle.execute(args.data(), args.size());
}

TEST(XnnpackRegistry, FindsXnnpackAndRejectsUnknownIds) {
  const Backend* backend = find_backend("XnnpackBackend");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->id(), "XnnpackBackend");
  EXPECT_EQ(find_backend("VulkanBackend"), nullptr);
  EXPECT_EQ(find_backend(""), nullptr);
  EXPECT_EQ(find_backend("xnnpackbackend"), nullptr);
}

// A backend that only has an id, to watch the registry list it.
class IdOnlyBackend final : public Backend {
 public:
  std::string_view id() const override { return "IdOnlyBackend"; }
  std::unique_ptr<BackendModuleContext> create_module_context(const BackendOptions&) const override { return nullptr; }
  Result<std::unique_ptr<DelegateHandle>> init(ByteSpan, const std::vector<CompileSpecView>&,
                                               DelegateInitContext&) const override {
    return make_error(ErrorCode::kInternal, "IdOnlyBackend runs nothing");
  }
};

// Registering again (every worker's addon init does) keeps one entry per id;
// a further backend is found by its id and listed after the first.
TEST(XnnpackRegistry, RegistrationIsOncePerIdAndListedInOrder) {
  const Backend* xnnpack = find_backend("XnnpackBackend");
  ASSERT_NE(xnnpack, nullptr);
  backends::register_xnnpack_backend();
  EXPECT_EQ(find_backend("XnnpackBackend"), xnnpack);

  static const IdOnlyBackend id_only;
  register_backend(id_only);
  register_backend(id_only);
  EXPECT_EQ(find_backend("IdOnlyBackend"), &id_only);
  EXPECT_EQ(registered_backend_ids(), "XnnpackBackend, IdOnlyBackend");
}

// Both add programs: out = a + b, whatever the buffers' padding.
void check_add_file(const std::string& file) {
  DelegatedMethod method = load_method(file);
  ASSERT_NE(method.delegate, nullptr);
  auto delegate = init_delegate(method);
  ASSERT_TRUE(delegate.handle);
  for (size_t slack : {size_t{0}, size_t{64}}) {
    for (uint32_t round = 0; round < 3; ++round) {
      auto tensors = method.make_args(slack);
      ASSERT_EQ(tensors.size(), 3u);
      const size_t n = tensors[0]->numel();
      auto a = pseudo_random(n, 10 + round, 100.0f);
      auto b = pseudo_random(n, 20 + round, 100.0f);
      tensors[0]->fill(a);
      tensors[1]->fill(b);
      Status status = execute(*delegate.handle, tensors);
      ASSERT_TRUE(status) << status.error().message;
      std::vector<float> expected(n);
      for (size_t i = 0; i < n; ++i) expected[i] = a[i] + b[i];
      EXPECT_TRUE(close_to(tensors[2]->to_vector(), expected)) << file << " slack " << slack;
    }
  }
}

TEST(XnnpackFiles, NprAddComputesSum) {
  ETNA_REQUIRE_TESTDATA();
  check_add_file("npr_add_xnnpack.pte");
}

TEST(XnnpackFiles, DjlUnplannedAddComputesSum) {
  ETNA_REQUIRE_TESTDATA();
  check_add_file("djl_add_unplanned_xnnpack.pte");
}

// Runs a method whose delegate takes one input and gives one output, on
// buffers of the planned size and then on larger ones, against `reference`
// of the pseudo-random input (`count` values from `seed`, then `seed + 1`).
void check_one_in_one_out(const DelegatedMethod& method, size_t count, uint32_t seed, float range,
                          const std::function<std::vector<float>(const std::vector<float>&)>& reference) {
  auto delegate = init_delegate(method);
  ASSERT_TRUE(delegate.handle);
  for (uint32_t round = 0; round < 2; ++round) {
    auto tensors = method.make_args(round == 0 ? 0 : 64);
    ASSERT_EQ(tensors.size(), 2u);
    const auto x = pseudo_random(count, seed + round, range);
    tensors[0]->fill(x);
    Status status = execute(*delegate.handle, tensors);
    ASSERT_TRUE(status) << status.error().message;
    EXPECT_TRUE(close_to(tensors[1]->to_vector(), reference(x)));
  }
}

TEST(XnnpackFiles, Linear129MatchesReferenceFromNamedData) {
  ETNA_REQUIRE_TESTDATA();
  DelegatedMethod method = load_method("djl_lin129_planned.pte");
  ASSERT_NE(method.delegate, nullptr);
  // Graph: FC(input id 0, filter id 1 [64, 129], bias id 2) -> id 3.
  const std::vector<float> weights = method.named_constant(1);
  const std::vector<float> bias = method.named_constant(2);
  ASSERT_EQ(weights.size(), 64u * 129u);
  ASSERT_EQ(bias.size(), 64u);

  check_one_in_one_out(method, 129, 7, 3.0f, [&](const std::vector<float>& x) {
    std::vector<float> expected(64);
    for (size_t n = 0; n < 64; ++n) {
      double sum = bias[n];
      for (size_t k = 0; k < 129; ++k) sum += double(weights[n * 129 + k]) * x[k];
      expected[n] = static_cast<float>(sum);
    }
    return expected;
  });
}

TEST(XnnpackFiles, ConvMatchesReferenceFromNamedData) {
  ETNA_REQUIRE_TESTDATA();
  DelegatedMethod method = load_method("djl_conv_xnnpack.pte");
  ASSERT_NE(method.delegate, nullptr);
  // Graph: transpose NCHW->NHWC, conv 3x3 pad 1 stride 1 with relu bounds
  // (filter id 2 OHWI [8, 3, 3, 3], bias id 4), transpose back.
  const fbx::Node* conv = method.graph().nodes()->Get(1);
  ASSERT_EQ(conv->node_type(), fbx::NodeUnion::XNNConv2d);
  const fbx::Convolution* params = conv->node_as_XNNConv2d();
  EXPECT_EQ(params->padding_top(), 1u);
  EXPECT_EQ(params->kernel_height(), 3u);
  EXPECT_EQ(params->subsampling_height(), 1u);
  ASSERT_NE(conv->output_min_max(), nullptr);
  EXPECT_EQ(conv->output_min_max()->output_min(), 0.0f);

  const std::vector<float> filter = method.named_constant(2);
  const std::vector<float> bias = method.named_constant(4);
  ASSERT_EQ(filter.size(), 8u * 3 * 3 * 3);
  ASSERT_EQ(bias.size(), 8u);

  const size_t C = 3, H = 16, W = 16, O = 8;
  check_one_in_one_out(method, C * H * W, 31, 1.0f, [&](const std::vector<float>& x) {
    std::vector<float> expected(O * H * W);
    for (size_t o = 0; o < O; ++o) {
      for (size_t y = 0; y < H; ++y) {
        for (size_t xx = 0; xx < W; ++xx) {
          double sum = bias[o];
          for (size_t kh = 0; kh < 3; ++kh) {
            for (size_t kw = 0; kw < 3; ++kw) {
              const long iy = long(y) + long(kh) - 1, ix = long(xx) + long(kw) - 1;
              if (iy < 0 || ix < 0 || iy >= long(H) || ix >= long(W)) continue;
              for (size_t c = 0; c < C; ++c) {
                sum += double(x[(c * H + iy) * W + ix]) * filter[((o * 3 + kh) * 3 + kw) * C + c];
              }
            }
          }
          expected[(o * H + y) * W + xx] = sum > 0 ? static_cast<float>(sum) : 0.0f;
        }
      }
    }
    return expected;
  });
}

TEST(XnnpackFiles, NamedKeysAreSha256OfTheirBytes) {
  ETNA_REQUIRE_TESTDATA();
  // The exporter names constants by content; etna hashes unnamed constants
  // the same way, so this checks the hash against real keys.
  auto program = Program::load_file(testdata_dir() + "/djl_conv_xnnpack.pte");
  ASSERT_TRUE(program) << program.error().message;
  const auto* named = (*program)->root().named_data();
  ASSERT_NE(named, nullptr);
  ASSERT_EQ(named->size(), 2u);
  for (const pte::NamedData* entry : *named) {
    auto bytes = (*program)->named_data(entry->key()->str());
    ASSERT_TRUE(bytes.has_value());
    EXPECT_EQ(xnn::sha256_hex(bytes->data, bytes->size), entry->key()->str());
  }
}

}  // namespace
}  // namespace etna::test
