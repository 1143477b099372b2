// Sharing: packed weights created once per program for every module,
// delegate instance and method using the same constants (once per module
// for delegates made without a program), workspaces borrowed per call from
// the program's pool when sharing is on, one per instance otherwise.
#include <gtest/gtest.h>

#include <thread>

#include "backend_test_support.h"
#include "backends/xnnpack/xnnpack_backend.h"
#include "core/module.h"
#include "core/program.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

// y = relu(x @ w^T + b) with x [batch, 64], w [32, 64]; `extra_add` inserts a
// subgraph add (and so an intermediate) before the FC.
std::vector<uint8_t> linear_payload(const std::vector<float>& w, const std::vector<float>& b, uint32_t batch,
                                    bool extra_add = false, Layout layout = Layout::kConstantRegion) {
  PayloadBuilder builder;
  const uint32_t x = builder.input({batch, 64}, 0);
  const uint32_t ww = builder.constant({32, 64}, w);
  const uint32_t bb = builder.constant({32}, b);
  const uint32_t y = builder.output({batch, 32}, 1);
  uint32_t fc_input = x;
  if (extra_add) {
    fc_input = builder.internal({batch, 64});
    builder.binary(NodeUnion::XNNAdd, x, x, fc_input);
  }
  builder.fully_connected(fc_input, ww, bb, y, 0, std::make_pair(0.0f, INFINITY));
  return builder.finish(layout, 2);
}

std::vector<float> linear_reference(const std::vector<float>& x, const std::vector<float>& w,
                                    const std::vector<float>& b, size_t batch, float input_scale) {
  std::vector<float> y(batch * 32);
  for (size_t r = 0; r < batch; ++r) {
    for (size_t o = 0; o < 32; ++o) {
      double sum = b[o];
      for (size_t k = 0; k < 64; ++k) sum += double(x[r * 64 + k]) * input_scale * w[o * 64 + k];
      y[r * 32 + o] = sum > 0 ? static_cast<float>(sum) : 0.0f;
    }
  }
  return y;
}

Status run_linear(xnn::XnnpackDelegate& delegate, uint32_t batch, uint32_t seed, const std::vector<float>& w,
                  const std::vector<float>& b, float input_scale) {
  LocalTensor x(ScalarType::kFloat, {batch, 64}), y(ScalarType::kFloat, {batch, 32});
  const auto input = pseudo_random(size_t(batch) * 64, seed);
  x.fill(input);
  Status status = run_delegate(delegate, {&x, &y});
  if (!status) return status;
  EXPECT_TRUE(close_to(y.to_vector(), linear_reference(input, w, b, batch, input_scale))) << "seed " << seed;
  return Status::ok();
}

TEST(XnnpackSharing, SamePayloadTwicePacksOnce) {
  const auto w = pseudo_random(32 * 64, 1), b = pseudo_random(32, 2);
  const auto payload = linear_payload(w, b, 4);

  xnn::XnnpackModuleContext single(BackendOptions{});
  auto alone = make_delegate(payload, single);
  ASSERT_TRUE(alone) << alone.error().message;
  const uint64_t one_copy = single.memory().packed_weight_bytes;
  EXPECT_EQ(single.stats().operators_created, 1u);
  if (single.stats().allocation_metered) {
    // The packed filter is at least as large as the unpacked one.
    EXPECT_GE(single.stats().packed_operator_bytes, w.size() * sizeof(float) + b.size() * sizeof(float));
  }

  xnn::XnnpackModuleContext shared(BackendOptions{});
  auto first = make_delegate(payload, shared);
  auto second = make_delegate(payload, shared);
  ASSERT_TRUE(first) << first.error().message;
  ASSERT_TRUE(second) << second.error().message;
  const XnnpackStats stats = shared.stats();
  EXPECT_EQ(stats.packed_operators, 1u);
  EXPECT_EQ(stats.operators_created, 1u);
  EXPECT_EQ(stats.operators_reused, 1u);
  EXPECT_EQ(shared.memory().packed_weight_bytes, one_copy);

  // Both instances compute with the one operator, interleaved.
  ASSERT_TRUE(run_linear(**first, 4, 10, w, b, 1.0f));
  ASSERT_TRUE(run_linear(**second, 4, 11, w, b, 1.0f));
  ASSERT_TRUE(run_linear(**first, 4, 12, w, b, 1.0f));
}

TEST(XnnpackSharing, DifferentMethodsWithTheSameWeightsShareThePacking) {
  // Two "methods": different graphs and batch sizes, identical weight bytes
  // without keys (offset-based constants are matched by SHA-256).
  const auto w = pseudo_random(32 * 64, 3), b = pseudo_random(32, 4);
  const auto prefill = linear_payload(w, b, 8, true);
  const auto decode = linear_payload(w, b, 1, false);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto a = make_delegate(prefill, context);
  auto d = make_delegate(decode, context);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(context.stats().operators_created, 1u);
  EXPECT_EQ(context.stats().packed_operators, 1u);
  ASSERT_TRUE(run_linear(**a, 8, 20, w, b, 2.0f));
  ASSERT_TRUE(run_linear(**d, 1, 21, w, b, 1.0f));
  ASSERT_TRUE(run_linear(**a, 8, 22, w, b, 2.0f));

  // Different bytes are not shared.
  auto other_w = w;
  other_w[5] += 1.0f;
  auto other = make_delegate(linear_payload(other_w, b, 1), context);
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(context.stats().operators_created, 2u);
  EXPECT_EQ(context.stats().packed_operators, 2u);
}

TEST(XnnpackSharing, SeparateModulesPackSeparately) {
  const auto w = pseudo_random(32 * 64, 5), b = pseudo_random(32, 6);
  const auto payload = linear_payload(w, b, 2);
  xnn::XnnpackModuleContext one(BackendOptions{}), two(BackendOptions{});
  auto a = make_delegate(payload, one);
  auto c = make_delegate(payload, two);
  ASSERT_TRUE(a && c);
  EXPECT_EQ(one.stats().operators_created, 1u);
  EXPECT_EQ(two.stats().operators_created, 1u);
  EXPECT_EQ(one.memory().packed_weight_bytes, two.memory().packed_weight_bytes);
}

TEST(XnnpackSharing, PackedWeightsGoWithTheirLastUser) {
  const auto w = pseudo_random(32 * 64, 7), b = pseudo_random(32, 8);
  const auto payload = linear_payload(w, b, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto a = make_delegate(payload, context);
  auto c = make_delegate(payload, context);
  ASSERT_TRUE(a && c);
  EXPECT_GT(context.memory().packed_weight_bytes, 0u);
  a->reset();
  EXPECT_GT(context.memory().packed_weight_bytes, 0u);
  EXPECT_EQ(context.stats().packed_operators, 1u);
  c->reset();
  EXPECT_EQ(context.memory().packed_weight_bytes, 0u);
  EXPECT_EQ(context.stats().packed_operators, 0u);
}

TEST(XnnpackSharing, DelegateOutlivesItsModuleContext) {
  const auto w = pseudo_random(32 * 64, 9), b = pseudo_random(32, 10);
  BackendOptions options;
  options.share_workspace = true;
  options.num_threads = 2;
  auto context = std::make_unique<xnn::XnnpackModuleContext>(options);
  auto delegate = make_delegate(linear_payload(w, b, 3, true), *context);
  ASSERT_TRUE(delegate) << delegate.error().message;
  context.reset();
  ASSERT_TRUE(run_linear(**delegate, 3, 30, w, b, 2.0f));
}

// Workspace needs of two different graphs, measured alone.
struct TwoGraphs {
  std::vector<float> w = pseudo_random(32 * 64, 11), b = pseudo_random(32, 12);
  std::vector<uint8_t> small = linear_payload(w, b, 2, true);
  std::vector<uint8_t> large = linear_payload(w, b, 16, true);

  static uint64_t need(const std::vector<uint8_t>& payload) {
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context);
    EXPECT_TRUE(delegate) << delegate.error().message;
    return context.memory().workspace_bytes;
  }
};

BackendOptions sharing_workspace(bool share) {
  BackendOptions options;
  options.share_workspace = share;
  return options;
}

// Delegates of both graphs in one module context, sharing a workspace or not.
struct TwoDelegates {
  TwoDelegates(const TwoGraphs& graphs, bool share_workspace)
      : context(sharing_workspace(share_workspace)),
        a(make_delegate(graphs.small, context)),
        c(make_delegate(graphs.large, context)) {}

  xnn::XnnpackModuleContext context;
  Result<std::unique_ptr<xnn::XnnpackDelegate>> a, c;
};

TEST(XnnpackSharing, SharedWorkspaceIsTheLargestNeed) {
  TwoGraphs graphs;
  const uint64_t small = TwoGraphs::need(graphs.small), large = TwoGraphs::need(graphs.large);
  ASSERT_GT(small, 0u);
  ASSERT_GT(large, small);

  TwoDelegates shared(graphs, true);
  auto& [context, a, c] = shared;
  ASSERT_TRUE(a && c);
  EXPECT_EQ(context.memory().workspace_bytes, std::max(small, large));
  EXPECT_EQ(context.memory().pooled_workspace_bytes, std::max(small, large));
  EXPECT_EQ(context.stats().workspaces, 0u);  // none of its own: borrowed per call
  // Both run correctly over the one workspace, interleaved.
  ASSERT_TRUE(run_linear(**a, 2, 40, graphs.w, graphs.b, 2.0f));
  ASSERT_TRUE(run_linear(**c, 16, 41, graphs.w, graphs.b, 2.0f));
  ASSERT_TRUE(run_linear(**a, 2, 42, graphs.w, graphs.b, 2.0f));
  EXPECT_EQ(context.memory().workspace_bytes, std::max(small, large));
}

TEST(XnnpackSharing, UnsharedWorkspacesAddUp) {
  TwoGraphs graphs;
  const uint64_t small = TwoGraphs::need(graphs.small), large = TwoGraphs::need(graphs.large);
  TwoDelegates unshared(graphs, false);
  auto& [context, a, c] = unshared;
  ASSERT_TRUE(a && c);
  EXPECT_EQ(context.memory().workspace_bytes, small + large);
  EXPECT_EQ(context.stats().workspaces, 2u);
  ASSERT_TRUE(run_linear(**a, 2, 50, graphs.w, graphs.b, 2.0f));
  ASSERT_TRUE(run_linear(**c, 16, 51, graphs.w, graphs.b, 2.0f));
  a->reset();
  EXPECT_EQ(context.memory().workspace_bytes, large);
}

TEST(XnnpackSharing, ThreadpoolGivesSameResults) {
  const auto w = pseudo_random(32 * 64, 13), b = pseudo_random(32, 14);
  BackendOptions options;
  options.num_threads = 2;
  xnn::XnnpackModuleContext context(options);
  auto delegate = make_delegate(linear_payload(w, b, 16, true), context);
  ASSERT_TRUE(delegate) << delegate.error().message;
  ASSERT_TRUE(run_linear(**delegate, 16, 60, w, b, 2.0f));
}

TEST(XnnpackSharing, SeparateModulesRunInParallel) {
  const auto w = pseudo_random(32 * 64, 15), b = pseudo_random(32, 16);
  const auto payload = linear_payload(w, b, 8, true);
  auto work = [&](uint32_t seed) {
    BackendOptions options;
    options.share_workspace = true;
    xnn::XnnpackModuleContext context(options);
    auto delegate = make_delegate(payload, context);
    ASSERT_TRUE(delegate) << delegate.error().message;
    for (uint32_t round = 0; round < 40; ++round) {
      ASSERT_TRUE(run_linear(**delegate, 8, seed + round, w, b, 2.0f));
    }
  };
  std::thread first(work, 100), second(work, 200);
  first.join();
  second.join();
}

// Modules of one program share one packed operator and one workspace pool;
// their calls, on separate threads (each setting the operator up over its own
// buffers), take turns on the operator and borrow a workspace each.
TEST(XnnpackSharing, ModulesOfOneProgramRunInParallelOnOnePacking) {
  const auto w = pseudo_random(32 * 64, 17), b = pseudo_random(32, 18);
  const auto payload = linear_payload(w, b, 8, true);
  auto program = std::make_shared<xnn::XnnpackProgramContext>();
  ASSERT_TRUE(xnn::ensure_xnnpack_initialized());
  BackendOptions options;
  options.share_workspace = true;
  xnn::XnnpackModuleContext one(options), two(options);
  std::vector<std::unique_ptr<xnn::XnnpackDelegate>> delegates;
  for (xnn::XnnpackModuleContext* context : {&one, &two}) {
    auto parsed = xnn::parse_payload(ByteSpan{payload.data(), payload.size()}, {});
    ASSERT_TRUE(parsed) << parsed.error().message;
    auto delegate = xnn::XnnpackDelegate::create(std::move(*parsed), *context, "test delegate", program);
    ASSERT_TRUE(delegate) << delegate.error().message;
    delegates.push_back(std::move(*delegate));
  }
  EXPECT_EQ(program->operators_created(), 1u);
  EXPECT_EQ(one.memory().shared_packed_weight_bytes, one.memory().packed_weight_bytes);
  auto work = [&](xnn::XnnpackDelegate* delegate, uint32_t seed) {
    for (uint32_t round = 0; round < 40; ++round) {
      ASSERT_TRUE(run_linear(*delegate, 8, seed + round, w, b, 2.0f));
    }
  };
  std::thread first(work, delegates[0].get(), 100), second(work, delegates[1].get(), 200);
  first.join();
  second.join();
  // Each call borrowed a workspace from the program's pool and gave it back;
  // the pool made at most one per call in flight.
  EXPECT_EQ(program->workspace_pool()->lent(), 0u);
  size_t made = 0;
  program->workspace_pool()->for_each([&](const xnn::Workspace&) { ++made; });
  EXPECT_GE(made, 1u);
  EXPECT_LE(made, 2u);
  EXPECT_GT(one.memory().pooled_workspace_bytes, 0u);
  EXPECT_EQ(one.stats().workspaces, 0u);
}

// Through the Backend interface with a real program: two instances of the
// same delegate (as two methods would have) report packed bytes once.
TEST(XnnpackSharing, RealProgramTwoInstancesReportPackedBytesOnce) {
  ETNA_REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/djl_lin129_planned.pte");
  ASSERT_TRUE(program) << program.error().message;
  const pte::ExecutionPlan& plan = (*program)->method(0);
  const pte::BackendDelegate& entry = *plan.delegates()->Get(0);
  const ByteSpan payload = (*program)->delegate_payload(entry);
  const Backend* backend = find_backend(entry.id()->str());
  ASSERT_NE(backend, nullptr);

  auto single = backend->create_module_context(BackendOptions{});
  DelegateInitContext single_init{**program, single.get(), "forward", 0};
  auto alone = backend->init(payload, {}, single_init);
  ASSERT_TRUE(alone) << alone.error().message;
  const uint64_t one = single->memory().packed_weight_bytes;
  EXPECT_GE(one, 64u * 129 * sizeof(float));

  auto context = backend->create_module_context(BackendOptions{});
  DelegateInitContext forward{**program, context.get(), "forward", 0};
  DelegateInitContext second{**program, context.get(), "forward_again", 0};
  auto a = backend->init(payload, {}, forward);
  auto c = backend->init(payload, {}, second);
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(context->memory().packed_weight_bytes, one);
  auto stats = xnnpack_stats(*context);
  ASSERT_TRUE(stats.has_value());
  // The program already holds the first module's packing: both instances use it.
  EXPECT_EQ(stats->operators_created, 0u);
  EXPECT_EQ(stats->operators_reused, 2u);
}

// Modules over one program: the first parses and packs, the others use its
// parsed payload and its packing; the packing goes with the last delegate
// that holds it.
TEST(XnnpackSharing, ModulesOverOneProgramShareOnePacking) {
  ETNA_REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/djl_lin129_planned.pte");
  ASSERT_TRUE(program) << program.error().message;
  const pte::BackendDelegate& entry = *(*program)->method(0).delegates()->Get(0);
  const ByteSpan payload = (*program)->delegate_payload(entry);
  const Backend* backend = find_backend(entry.id()->str());
  ASSERT_NE(backend, nullptr);
  auto program_context = std::dynamic_pointer_cast<xnn::XnnpackProgramContext>((*program)->backend_context(*backend));
  ASSERT_NE(program_context, nullptr);
  EXPECT_EQ((*program)->backend_context(*backend), program_context);  // one per program

  auto one = backend->create_module_context(BackendOptions{});
  auto two = backend->create_module_context(BackendOptions{});
  DelegateInitContext first_init{**program, one.get(), "forward", 0};
  DelegateInitContext second_init{**program, two.get(), "forward", 0};
  EXPECT_EQ(program_context->checked_payload(payload), nullptr);
  auto a = backend->init(payload, {}, first_init);
  ASSERT_TRUE(a) << a.error().message;
  // The second module copies the first one's parsed and checked payload.
  const auto parsed = program_context->checked_payload(payload);
  ASSERT_NE(parsed, nullptr);
  EXPECT_FALSE(parsed->graph.values.empty());
  const uint64_t packed = one->memory().packed_weight_bytes;
  EXPECT_GE(packed, 64u * 129 * sizeof(float));
  EXPECT_EQ(one->memory().shared_packed_weight_bytes, 0u);  // nobody else uses it yet

  auto c = backend->init(payload, {}, second_init);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(program_context->checked_payload(payload), parsed);
  EXPECT_EQ(program_context->operators_created(), 1u);
  EXPECT_EQ(xnnpack_stats(*two)->operators_created, 0u);
  EXPECT_EQ(xnnpack_stats(*two)->operators_reused, 1u);
  // Each module reports what it uses, and that all of it is shared.
  EXPECT_EQ(two->memory().packed_weight_bytes, packed);
  EXPECT_EQ(one->memory().shared_packed_weight_bytes, packed);
  EXPECT_EQ(two->memory().shared_packed_weight_bytes, packed);

  // The first module's delegate and context go: the second keeps the packing.
  a->reset();
  one.reset();
  EXPECT_EQ(two->memory().packed_weight_bytes, packed);
  EXPECT_EQ(two->memory().shared_packed_weight_bytes, 0u);
  auto third = backend->create_module_context(BackendOptions{});
  DelegateInitContext third_init{**program, third.get(), "forward", 0};
  auto d = backend->init(payload, {}, third_init);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(program_context->operators_created(), 1u);

  // With the last user gone the packing is freed: the next module packs again.
  c->reset();
  d->reset();
  EXPECT_EQ(two->memory().packed_weight_bytes, 0u);
  auto again = backend->init(payload, {}, second_init);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(program_context->operators_created(), 2u);
}

// Through Module: the report counts the shared bytes in every module.
TEST(XnnpackSharing, ModuleReportsShowSharedPackedWeights) {
  ETNA_REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/djl_lin129_planned.pte");
  ASSERT_TRUE(program) << program.error().message;
  ModuleOptions options;
  options.sharing = ArenaSharing::kOn;  // loads every method now
  auto first = Module::load(*program, options);
  ASSERT_TRUE(first) << first.error().message;
  const MemoryReport alone = (*first)->memory_report();
  EXPECT_GT(alone.packed_weight_bytes, 0u);
  EXPECT_EQ(alone.shared_packed_weight_bytes, 0u);

  auto second = Module::load(*program, options);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ((*second)->memory_report().packed_weight_bytes, alone.packed_weight_bytes);
  EXPECT_EQ((*second)->memory_report().shared_packed_weight_bytes, alone.packed_weight_bytes);
  EXPECT_EQ((*first)->memory_report().shared_packed_weight_bytes, alone.packed_weight_bytes);

  first->reset();
  EXPECT_EQ((*second)->memory_report().shared_packed_weight_bytes, 0u);
  EXPECT_EQ((*second)->memory_report().packed_weight_bytes, alone.packed_weight_bytes);
}

}  // namespace
}  // namespace etna::test
