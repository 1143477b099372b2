// etna kernels split over the module's thread pool (parallel.h): on
// every dot-product path the CPU has, at 2 and 3 threads, each kernel gives
// the bits it gives on one thread, both with the real minimum work per task
// and with the minimum ignored (so small shapes split into their smallest
// tiles and leave every remainder); outputs start as NaN, so an element no
// task wrote shows. Also the split rule itself. Run under ThreadSanitizer,
// these are the tests that show the kernels' tasks do not race.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/parallel.h"
#include "core/thread_pool.h"
#include "test_support.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

// A dot-product path, and optionally the finest split, for one scope.
class Forced {
 public:
  Forced(xnn::DotPath path, bool fine_split) {
    xnn::force_dot_path(path);
    xnn::force_fine_split(fine_split);
  }
  ~Forced() {
    xnn::clear_forced_dot_path();
    xnn::force_fine_split(false);
  }
  Forced(const Forced&) = delete;
  Forced& operator=(const Forced&) = delete;
};

struct Input {
  std::vector<int64_t> sizes;
  std::vector<float> values;
};

// A built payload with its inputs (external ids 0..) and one output (the
// next id).
struct TestGraph {
  PayloadBuilder builder;
  std::vector<uint8_t> payload;
  std::vector<Input> inputs;
  std::vector<int64_t> output_sizes;
};

// Two calls on one delegate of a module with `threads` threads; the second
// call's output, which starts as NaN (empty if anything failed).
std::vector<float> run_graph(const TestGraph& g, int threads, xnn::DotPath path, bool fine_split) {
  BackendOptions options;
  options.num_threads = threads;
  xnn::XnnpackModuleContext context(options);
  // Forced before the delegate is made: packing splits and picks its build as calls do.
  const Forced forced(path, fine_split);
  auto delegate = make_delegate(g.payload, context, g.builder.lookup());
  EXPECT_TRUE(delegate) << delegate.error().message;
  if (!delegate) return {};
  std::vector<std::unique_ptr<LocalTensor>> tensors;
  std::vector<LocalTensor*> args;
  for (const Input& input : g.inputs) {
    tensors.push_back(std::make_unique<LocalTensor>(ScalarType::kFloat, input.sizes));
    tensors.back()->fill(input.values);
    args.push_back(tensors.back().get());
  }
  LocalTensor output(ScalarType::kFloat, g.output_sizes);
  args.push_back(&output);
  for (int call = 0; call < 2; ++call) {
    std::fill(output.floats(), output.floats() + output.numel(), std::numeric_limits<float>::quiet_NaN());
    Status ran = run_delegate(**delegate, args);
    EXPECT_TRUE(ran) << ran.error().message;
    if (!ran) return {};
  }
  return output.to_vector();
}

// The graph on every path: at 2 and 3 threads, split as the rule says and as
// finely as the shapes allow, the same bits as on one thread, every output
// written.
void expect_same_bits_on_any_threads(const TestGraph& g) {
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    const std::vector<float> single = run_graph(g, 1, path, false);
    ASSERT_FALSE(single.empty());
    for (size_t i = 0; i < single.size(); ++i) ASSERT_FALSE(std::isnan(single[i])) << "unwritten output " << i;
    for (int threads : {2, 3}) {
      for (bool fine : {false, true}) {
        SCOPED_TRACE(std::to_string(threads) + " threads" + (fine ? ", finest split" : ""));
        const std::vector<float> split = run_graph(g, threads, path, fine);
        ASSERT_EQ(split.size(), single.size());
        EXPECT_EQ(0, std::memcmp(split.data(), single.data(), single.size() * sizeof(float)))
            << "differs from the single-threaded result";
      }
    }
  }
}

std::vector<uint32_t> u32(const std::vector<int64_t>& dims) { return std::vector<uint32_t>(dims.begin(), dims.end()); }

size_t count_of(const std::vector<int64_t>& dims) {
  size_t count = 1;
  for (int64_t d : dims) count *= static_cast<size_t>(d);
  return count;
}

std::vector<uint8_t> random_bytes(size_t count, uint32_t seed) {
  std::vector<uint8_t> bytes(count);
  for (uint8_t& b : bytes) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(seed >> 24);
  }
  return bytes;
}

enum class Weights { kQc8, kQc4, kQb4 };

// Convert to qdint8, then FullyConnected over [out, in] weights.
void build_linear(TestGraph& g, size_t rows, size_t in, size_t out, Weights weights, size_t group = 32,
                  std::optional<std::pair<float, float>> bounds = {}) {
  PayloadBuilder& b = g.builder;
  g.inputs.push_back({{static_cast<int64_t>(rows), static_cast<int64_t>(in)},
                      pseudo_random(rows * in, static_cast<uint32_t>(rows + in), 2.0f)});
  g.output_sizes = {static_cast<int64_t>(rows), static_cast<int64_t>(out)};
  const std::vector<uint32_t> in_dims = u32(g.inputs[0].sizes);
  const uint32_t x = b.input(in_dims, 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 1);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, in_dims, fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  const uint32_t o = static_cast<uint32_t>(out), i = static_cast<uint32_t>(in);
  uint32_t filter = 0;
  std::vector<float> scales;
  for (size_t n = 0; n < out; ++n) scales.push_back(static_cast<float>(1 + n % 7) / 128.0f);
  switch (weights) {
    case Weights::kQc8:
      filter = b.channelwise(fbx::Datatype::qcint8, {o, i}, scales, 0, random_bytes(out * in, 5));
      break;
    case Weights::kQc4:
      filter = b.channelwise(fbx::Datatype::qcint4, {o, i}, scales, 0, random_bytes(out * ((in + 1) / 2), 6));
      break;
    case Weights::kQb4: {
      std::vector<uint16_t> bf16(out * (in / group));
      for (size_t k = 0; k < bf16.size(); ++k) bf16[k] = static_cast<uint16_t>(0x3c00 + k % 5 * 0x10);
      auto params =
          fbx::CreatePerChannelGroupQuant(b.fbb(), 0, 0, static_cast<int32_t>(group), b.fbb().CreateVector(bf16));
      const auto codes = random_bytes(out * ((in + 1) / 2), 7);
      filter = b.quantized_with(fbx::Datatype::qbint4, {o, i}, fbx::QuantParams::PerChannelGroupQuant, params.Union(),
                                &codes);
      break;
    }
  }
  const uint32_t bias = b.constant({o}, pseudo_random(out, 8, 0.5f));
  const uint32_t y = b.output(u32(g.output_sizes), 1);
  b.unary(NodeUnion::XNNConvert, x, q);
  b.fully_connected(q, filter, bias, y, 0, bounds);
  g.payload = b.finish(Layout::kNamedData, 2);
}

TEST(XnnpackParallelKernels, DynamicLinearSplitsRowsAndChannels) {
  struct Case {
    size_t rows, in, out;
    Weights weights;
    size_t group;
    bool bounded;
  };
  // One row (channels split only), rows leaving remainders of the 16-row and
  // 4-row tiles, channel counts leaving remainders of the 4-group blocks; the
  // last two are big enough to split under the real minimum.
  const Case cases[] = {
      {1, 64, 300, Weights::kQb4, 32, false},   {3, 96, 33, Weights::kQb4, 8, true},
      {17, 200, 52, Weights::kQc8, 0, false},   {37, 130, 300, Weights::kQc4, 0, true},
      {1, 2048, 520, Weights::kQb4, 32, false}, {40, 256, 200, Weights::kQc8, 0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("rows " + std::to_string(c.rows) + " in " + std::to_string(c.in) + " out " + std::to_string(c.out));
    TestGraph g;
    build_linear(g, c.rows, c.in, c.out, c.weights, c.group,
                 c.bounded ? std::make_optional(std::make_pair(-1.5f, 2.0f)) : std::nullopt);
    expect_same_bits_on_any_threads(g);
  }
}

// Convert (one scale per image) then Conv2d over a per-channel 8-bit filter.
void build_conv(TestGraph& g, size_t images, size_t height, size_t width, const PayloadBuilder::ConvParams& p) {
  PayloadBuilder& b = g.builder;
  const size_t in_channels = size_t{p.groups} * p.group_in, out_channels = size_t{p.groups} * p.group_out;
  const size_t out_h = (height + p.pad_top + p.pad_bottom - (p.kernel_h - 1) * p.dilation_h - 1) / p.stride_h + 1;
  const size_t out_w = (width + p.pad_left + p.pad_right - (p.kernel_w - 1) * p.dilation_w - 1) / p.stride_w + 1;
  const std::vector<int64_t> in_sizes{int64_t(images), int64_t(height), int64_t(width), int64_t(in_channels)};
  g.inputs.push_back({in_sizes, pseudo_random(count_of(in_sizes), 11, 3.0f)});
  g.output_sizes = {int64_t(images), int64_t(out_h), int64_t(out_w), int64_t(out_channels)};
  const uint32_t x = b.input(u32(in_sizes), 0);
  auto token = fbx::CreatePerTokenDynamicQuant(b.fbb(), 3);
  const uint32_t q =
      b.quantized_with(fbx::Datatype::qdint8, u32(in_sizes), fbx::QuantParams::PerTokenDynamicQuant, token.Union());
  std::vector<float> scales;
  for (size_t n = 0; n < out_channels; ++n) scales.push_back(static_cast<float>(1 + n % 9) / 256.0f);
  const uint32_t filter =
      b.channelwise(fbx::Datatype::qcint8, {uint32_t(out_channels), p.kernel_h, p.kernel_w, p.group_in}, scales, 0,
                    random_bytes(out_channels * p.kernel_h * p.kernel_w * p.group_in, 12));
  const uint32_t bias = b.constant({uint32_t(out_channels)}, pseudo_random(out_channels, 13, 0.5f));
  const uint32_t y = b.output(u32(g.output_sizes), 1);
  b.unary(NodeUnion::XNNConvert, x, q);
  b.convolution(NodeUnion::XNNConv2d, p, q, filter, bias, y);
  g.payload = b.finish(Layout::kNamedData, 2);
}

TEST(XnnpackParallelKernels, DynamicConvSplitsPixelTiles) {
  PayloadBuilder::ConvParams grouped;
  grouped.kernel_h = grouped.kernel_w = 3;
  grouped.pad_top = grouped.pad_right = grouped.pad_bottom = grouped.pad_left = 1;
  grouped.groups = 2;
  grouped.group_in = 5;
  grouped.group_out = 7;
  PayloadBuilder::ConvParams strided;
  strided.kernel_h = strided.kernel_w = 3;
  strided.stride_h = strided.stride_w = 2;
  strided.group_in = 16;
  strided.group_out = 24;
  PayloadBuilder::ConvParams pointwise;
  pointwise.group_in = 64;
  pointwise.group_out = 40;
  struct Case {
    size_t images, height, width;
    PayloadBuilder::ConvParams conv;
  };
  // Three images of one tile each; one image of two tiles (fewer tiles than
  // 3 threads: the products split instead); many tiles over two images.
  const Case cases[] = {{3, 9, 11, grouped}, {1, 41, 31, strided}, {2, 30, 37, pointwise}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.images) + " images " + std::to_string(c.height) + "x" + std::to_string(c.width));
    TestGraph g;
    build_conv(g, c.images, c.height, c.width, c.conv);
    expect_same_bits_on_any_threads(g);
  }
}

TEST(XnnpackParallelKernels, BatchMatmulSplitsBatchesRowsAndColumns) {
  struct Case {
    size_t batches, m, k, n;
    bool transposed;
  };
  // A decode step's q times keys (one row: columns split) and p times
  // values; odd sizes on both layouts; k a multiple of 8 with transposed B
  // (register-turned blocks, then a packed panel for the last columns).
  const Case cases[] = {{1, 1, 64, 77, true},   {12, 1, 64, 300, false}, {12, 1, 300, 64, false},
                        {3, 13, 17, 50, false}, {3, 13, 17, 50, true},   {2, 19, 64, 130, true},
                        {1, 37, 9, 5, false},   {1, 64, 256, 256, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.batches) + "x" + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                 std::to_string(c.n) + (c.transposed ? " transposed" : ""));
    TestGraph g;
    const int64_t q = int64_t(c.batches), m = int64_t(c.m), k = int64_t(c.k), n = int64_t(c.n);
    const std::vector<int64_t> a_sizes{q, m, k};
    const std::vector<int64_t> b_sizes = c.transposed ? std::vector<int64_t>{q, n, k} : std::vector<int64_t>{q, k, n};
    g.inputs.push_back({a_sizes, pseudo_random(count_of(a_sizes), 21)});
    g.inputs.push_back({b_sizes, pseudo_random(count_of(b_sizes), 22)});
    g.output_sizes = {q, m, n};
    const uint32_t va = g.builder.input(u32(a_sizes), 0), vb = g.builder.input(u32(b_sizes), 1);
    const uint32_t vc = g.builder.output(u32(g.output_sizes), 2);
    g.builder.binary(NodeUnion::XNNBatchMatrixMultiply, va, vb, vc, {}, c.transposed ? 0x1 : 0);
    g.payload = g.builder.finish(Layout::kConstantRegion, 3);
    expect_same_bits_on_any_threads(g);
  }
}

TEST(XnnpackParallelKernels, PatchDeconvolutionSplitsInputRows) {
  struct Case {
    uint32_t batch, height, width, in_channels, out_channels, kernel;
  };
  // Patch rows of 16 outputs (a product per row), then of 2 (by pixel).
  const Case cases[] = {{2, 7, 9, 8, 8, 2}, {1, 11, 13, 5, 1, 2}, {1, 40, 40, 16, 16, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.in_channels) + " -> " + std::to_string(c.out_channels));
    TestGraph g;
    PayloadBuilder::ConvParams p;
    p.kernel_h = p.stride_h = p.kernel_w = p.stride_w = c.kernel;
    p.group_in = c.in_channels;
    p.group_out = c.out_channels;
    const std::vector<int64_t> in_sizes{c.batch, c.height, c.width, c.in_channels};
    g.inputs.push_back({in_sizes, pseudo_random(count_of(in_sizes), 31)});
    g.output_sizes = {c.batch, c.height * c.kernel, c.width * c.kernel, c.out_channels};
    const uint32_t in = g.builder.input(u32(in_sizes), 0);
    const uint32_t f =
        g.builder.constant({c.out_channels, c.kernel, c.kernel, c.in_channels},
                           pseudo_random(size_t{c.out_channels} * c.kernel * c.kernel * c.in_channels, 32));
    const uint32_t b = g.builder.constant({c.out_channels}, pseudo_random(c.out_channels, 33));
    const uint32_t out = g.builder.output(u32(g.output_sizes), 1);
    g.builder.convolution(NodeUnion::XNNConvTranspose2d, p, in, f, b, out, std::make_pair(-0.5f, 0.75f));
    g.payload = g.builder.finish(Layout::kConstantRegion, 2);
    expect_same_bits_on_any_threads(g);
  }
}

// One data-movement node from input 0 into output 1.
template <typename Add>
TestGraph movement(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& out_sizes, Add add) {
  TestGraph g;
  std::vector<float> x(count_of(in_sizes));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  g.inputs.push_back({in_sizes, x});
  g.output_sizes = out_sizes;
  const uint32_t in = g.builder.input(u32(in_sizes), 0), out = g.builder.output(u32(out_sizes), 1);
  add(g.builder, in, out);
  g.payload = g.builder.finish(Layout::kConstantRegion, 2);
  return g;
}

TEST(XnnpackParallelKernels, DataMovementSplitsRowsAndBlocks) {
  struct Transpose {
    std::vector<int64_t> dims;
    std::vector<uint32_t> perm;
  };
  const Transpose transposes[] = {
      {{2, 3, 37, 41}, {0, 2, 3, 1}},  // RGB planes to pixels
      {{2, 37, 29, 8}, {0, 3, 1, 2}},  // NHWC to NCHW: blocks
      {{75, 133}, {1, 0}},             // one block: runs of rows
      {{300, 5}, {1, 0}},              // few columns
      {{1, 9, 70, 32}, {0, 2, 1, 3}},  // innermost kept: rows copied
      {{256, 64, 8}, {1, 0, 2}},       // the same, big enough for the real minimum
      {{512, 600}, {1, 0}},            // a transpose big enough for it
  };
  for (const Transpose& t : transposes) {
    std::vector<int64_t> out_sizes;
    for (uint32_t p : t.perm) out_sizes.push_back(t.dims[p]);
    SCOPED_TRACE("transpose of " + std::to_string(count_of(t.dims)) + " elements, rank " +
                 std::to_string(t.dims.size()));
    expect_same_bits_on_any_threads(movement(
        t.dims, out_sizes, [&](PayloadBuilder& b, uint32_t in, uint32_t out) { b.transpose(t.perm, in, out); }));
  }
  {
    SCOPED_TRACE("slice");
    expect_same_bits_on_any_threads(
        movement({7, 40, 33}, {5, 31, 20}, [](PayloadBuilder& b, uint32_t in, uint32_t out) {
          b.slice({1, 4, 9}, {5, 31, 20}, in, out);
        }));
  }
  {
    SCOPED_TRACE("slice of the odd elements of pairs");
    expect_same_bits_on_any_threads(
        movement({4, 12, 33, 2}, {4, 12, 33, 1}, [](PayloadBuilder& b, uint32_t in, uint32_t out) {
          b.slice({0, 0, 0, 1}, {4, 12, 33, 1}, in, out);
        }));
  }
  {
    SCOPED_TRACE("copy of an input into an output");
    expect_same_bits_on_any_threads(
        movement({300, 1000}, {1000, 300}, [](PayloadBuilder& b, uint32_t in, uint32_t out) {
          b.reshape({1000, 300}, in, out);
        }));
  }
  {
    SCOPED_TRACE("concatenation");
    TestGraph g;
    const std::vector<std::vector<int64_t>> parts = {{1, 33, 17, 3}, {1, 33, 17, 32}, {1, 33, 17, 9}};
    std::vector<uint32_t> ids;
    for (size_t i = 0; i < parts.size(); ++i) {
      g.inputs.push_back({parts[i], pseudo_random(count_of(parts[i]), static_cast<uint32_t>(40 + i))});
      ids.push_back(g.builder.input(u32(parts[i]), static_cast<uint32_t>(i)));
    }
    g.output_sizes = {1, 33, 17, 44};
    const uint32_t out = g.builder.output(u32(g.output_sizes), 3);
    g.builder.concatenate(3, ids, out);
    g.payload = g.builder.finish(Layout::kConstantRegion, 4);
    expect_same_bits_on_any_threads(g);
  }
}

// PReLU splits its runs: one slope over spans of a long run, one per element
// over whole rows, and runs of a slope broadcast along middle dims.
TEST(XnnpackParallelKernels, PReluSplitsRunsOfEverySlopeShape) {
  const std::vector<int64_t> sizes = {2, 16, 48, 40};
  for (const std::vector<uint32_t>& dims :
       std::vector<std::vector<uint32_t>>{{1}, {40}, {16, 1, 1}, {48, 1}, {16, 1, 40}, {2, 1, 48, 1}}) {
    size_t count = 1;
    for (uint32_t d : dims) count *= d;
    SCOPED_TRACE("slope of " + std::to_string(count) + " elements, rank " + std::to_string(dims.size()));
    TestGraph g;
    std::vector<float> slopes = pseudo_random(count, 12, 1.0f);
    for (float& v : slopes) v = -std::fabs(v);  // negative: etna's kernel for every shape
    g.inputs.push_back({sizes, pseudo_random(count_of(sizes), 13, 2.0f)});
    g.output_sizes = sizes;
    const uint32_t x = g.builder.input(u32(sizes), 0);
    g.builder.binary(NodeUnion::XNNPReLU, x, g.builder.constant(dims, slopes), g.builder.output(u32(sizes), 1));
    g.payload = g.builder.finish(Layout::kConstantRegion, 2);
    expect_same_bits_on_any_threads(g);
  }
}

struct PoolDeleter {
  void operator()(pthreadpool_t pool) const { pthreadpool_destroy(pool); }
};
using Pool = std::unique_ptr<std::remove_pointer_t<pthreadpool_t>, PoolDeleter>;

TEST(XnnpackParallelKernels, SmallWorkStaysOnTheCallingThread) {
  const Pool two(pthreadpool_create(2)), three(pthreadpool_create(3));
  ASSERT_TRUE(two && three);
  constexpr size_t kMin = 1000;
  EXPECT_EQ(xnn::task_count(nullptr, 1000 * kMin, kMin), 1u);
  EXPECT_EQ(xnn::task_count(two.get(), 2 * kMin - 1, kMin), 1u);
  EXPECT_EQ(xnn::task_count(two.get(), 2 * kMin, kMin), 2u);
  EXPECT_EQ(xnn::task_count(two.get(), 3 * kMin, kMin), 2u);  // a multiple of the threads
  EXPECT_EQ(xnn::task_count(three.get(), 2 * kMin, kMin), 2u);
  EXPECT_EQ(xnn::task_count(three.get(), 7 * kMin, kMin), 6u);
  EXPECT_EQ(xnn::task_count(two.get(), 1000 * kMin, kMin), 2 * xnn::kTasksPerThread);
  EXPECT_EQ(xnn::pool_for(two.get(), 1), nullptr);
  EXPECT_EQ(xnn::pool_for(two.get(), 2), two.get());
  {
    const Forced fine(xnn::active_dot_path(), true);
    EXPECT_EQ(xnn::task_count(two.get(), 3, kMin), 2u);
    EXPECT_EQ(xnn::task_count(two.get(), 1, kMin), 1u);
  }
  // One task runs where it is called, without the pool.
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  xnn::parallel_for(xnn::pool_for(two.get(), 1), 1, [&](size_t) { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
}

// XNNPACK splits any operator over every thread it is given: a delegate of
// tiny operators (a fully connected 8 -> 8 and an add, as in a small RNN's
// step) gives them no pool, so 2,000 calls on a module with two threads
// leave its sleeping worker asleep; before, each operator woke it.
TEST(XnnpackParallelKernels, TinyXnnpackOperatorsLeaveThePoolAsleep) {
  test::settled_process_threads();
  const auto before = test::thread_ids();
  std::shared_ptr<ThreadPool> pool = ThreadPool::create(2);
  ASSERT_TRUE(pool);
  const std::vector<std::string> workers = test::threads_added(before, test::thread_ids());
  ASSERT_EQ(workers.size(), 1u);

  PayloadBuilder b;
  const uint32_t x = b.input({1, 8}, 0), y = b.output({1, 8}, 1), h = b.internal({1, 8});
  b.fully_connected(x, b.constant({8, 8}, pseudo_random(64, 3, 1.0f)), b.constant({8}, pseudo_random(8, 4, 1.0f)), h);
  b.binary(NodeUnion::XNNAdd, h, x, y);
  const auto payload = b.finish(PayloadBuilder::Layout::kConstantRegion, 2);
  BackendOptions options;
  options.num_threads = 2;
  options.pool = pool;
  xnn::XnnpackModuleContext context(options);
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor input(ScalarType::kFloat, {1, 8}), output(ScalarType::kFloat, {1, 8});
  input.fill(pseudo_random(8, 5, 1.0f));
  ASSERT_TRUE(run_delegate(**delegate, {&input, &output}));  // plans and packs
  pool->let_workers_sleep();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double asleep = test::thread_run_ms(workers[0]);
  ASSERT_GE(asleep, 0.0) << "no schedstat for the worker";
  for (int call = 0; call < 2000; ++call) ASSERT_TRUE(run_delegate(**delegate, {&input, &output}));
  EXPECT_LT(test::thread_run_ms(workers[0]) - asleep, 0.5);
}

TEST(XnnpackParallelKernels, EveryTaskRunsOnce) {
  const Pool three(pthreadpool_create(3));
  ASSERT_TRUE(three);
  std::vector<std::atomic<int>> runs(37);
  xnn::parallel_for(three.get(), runs.size(), [&](size_t i) { runs[i].fetch_add(1); });
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  std::vector<int> cells(5 * 7, 0);  // plain ints: ThreadSanitizer sees the tasks' writes and the reads after
  xnn::parallel_for_2d(three.get(), 5, 7, [&](size_t i, size_t j) { cells[i * 7 + j] += static_cast<int>(i + j); });
  for (size_t i = 0; i < 5; ++i) {
    for (size_t j = 0; j < 7; ++j) EXPECT_EQ(cells[i * 7 + j], static_cast<int>(i + j));
  }
}

}  // namespace
}  // namespace etna::test
