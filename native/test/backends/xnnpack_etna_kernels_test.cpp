// etna kernels where speed matters: the batch matrix multiply behind
// XNNBatchMatrixMultiply on every instruction-set path the CPU has, on shapes
// that leave remainders after its register tiles, against sums in double, and
// through the delegate at the shapes a decoder's attention gives it, with B
// rows strided and read in place through a transposed KV cache; GELU's
// vectorized erf; tanh, exp and log within 2 ulp with their specials; transposes between image layouts and transposed
// convolutions whose kernel is their stride, on every path; and reshapes
// that become views of their input's bytes instead of copies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/matmul_kernels.h"
#include "backends/xnnpack/memory_plan.h"

namespace etna::test {
namespace {

using Layout = PayloadBuilder::Layout;
using fbx::NodeUnion;

// Forces a path for the scope of a test step.
class ForcedPath {
 public:
  explicit ForcedPath(xnn::DotPath path) { xnn::force_dot_path(path); }
  ~ForcedPath() { xnn::clear_forced_dot_path(); }
  ForcedPath(const ForcedPath&) = delete;
  ForcedPath& operator=(const ForcedPath&) = delete;
};

// b_plain is [batches][k][n]; the product in double, rounded once.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& b_plain, size_t batches, size_t m,
                             size_t k, size_t n) {
  std::vector<float> c(batches * m * n);
  for (size_t q = 0; q < batches; ++q)
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double sum = 0;
        for (size_t p = 0; p < k; ++p) sum += double(a[(q * m + i) * k + p]) * b_plain[(q * k + p) * n + j];
        c[(q * m + i) * n + j] = static_cast<float>(sum);
      }
  return c;
}

// The same matrices stored [batches][n][k].
std::vector<float> transpose_batches(const std::vector<float>& b_plain, size_t batches, size_t k, size_t n) {
  std::vector<float> t(b_plain.size());
  for (size_t q = 0; q < batches; ++q)
    for (size_t p = 0; p < k; ++p)
      for (size_t j = 0; j < n; ++j) t[(q * n + j) * k + p] = b_plain[(q * k + p) * n + j];
  return t;
}

constexpr float kSentinel = 12345.0f;

// Runs a payload of one input (external id 0) and one output (id 1) on
// `path`, `calls` times over the same tensors; the last call's output
// (empty when the delegate could not be made or a call failed).
std::vector<float> run_on_path(PayloadBuilder& builder, const std::vector<int64_t>& in_sizes,
                               const std::vector<float>& x, const std::vector<int64_t>& out_sizes, xnn::DotPath path,
                               int calls = 1) {
  const auto payload = builder.finish(Layout::kConstantRegion, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, builder.lookup());
  EXPECT_TRUE(delegate) << delegate.error().message;
  if (!delegate) return {};
  LocalTensor input(ScalarType::kFloat, in_sizes), output(ScalarType::kFloat, out_sizes);
  input.fill(x);
  const ForcedPath forced(path);
  for (int call = 0; call < calls; ++call) {
    Status ran = run_delegate(**delegate, {&input, &output});
    EXPECT_TRUE(ran) << ran.error().message;
    if (!ran) return {};
  }
  return output.to_vector();
}

TEST(XnnpackEtnaKernels, MatmulEveryPathEveryLayoutMatchesDoubleSums) {
  const size_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const size_t ks[] = {1, 7, 8, 32, 33, 130};
  const size_t ns[] = {1, 5, 8, 15, 16, 17, 32, 40};
  // The scalar path's products (it runs first), which every path but the
  // fused AVX2 one gives bit for bit.
  std::vector<std::vector<float>> scalar_products;
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    const ForcedPath forced(path);
    size_t product = 0;
    for (size_t m : ms)
      for (size_t k : ks)
        for (size_t n : ns) {
          const auto a = pseudo_random(m * k, static_cast<uint32_t>(m * 1000 + k));
          const auto b = pseudo_random(k * n, static_cast<uint32_t>(k * 1000 + n));
          const auto want = reference(a, b, 1, m, k, n);
          const auto bt = transpose_batches(b, 1, k, n);
          for (bool transposed : {false, true}) {
            SCOPED_TRACE(std::string(xnn::dot_path_name(path)) + (transposed ? " transposed" : " plain") +
                         " m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
            // One row of sentinels past the end shows nothing is written beyond c.
            std::vector<float> c(m * n + n, kSentinel);
            xnn::matmul_f32(a.data(), transposed ? bt.data() : b.data(), c.data(), m, k, n, transposed);
            EXPECT_TRUE(close_to(std::vector<float>(c.begin(), c.begin() + m * n), want, 1e-5f));
            if (path == xnn::DotPath::kScalar) {
              scalar_products.push_back(c);
            } else if (!xnn::path_has_avx2(path)) {
              EXPECT_EQ(c, scalar_products.at(product)) << "not the scalar path's bits";
            }
            ++product;
            for (size_t i = m * n; i < c.size(); ++i) ASSERT_EQ(c[i], kSentinel) << "written past c at " << i;
            // The same rows `gap` elements further apart, NaN between them:
            // the same bits, and nothing outside the rows is read.
            const size_t rows = transposed ? n : k, row = transposed ? k : n, gap = 3;
            const std::vector<float>& dense = transposed ? bt : b;
            std::vector<float> wide(rows * (row + gap), std::numeric_limits<float>::quiet_NaN());
            for (size_t i = 0; i < rows; ++i) {
              std::copy(dense.begin() + i * row, dense.begin() + (i + 1) * row, wide.begin() + i * (row + gap));
            }
            std::vector<float> strided(m * n + n, kSentinel);
            xnn::matmul_f32(a.data(), wide.data(), row + gap, strided.data(), m, k, n, transposed);
            EXPECT_EQ(strided, c);
          }
        }
  }
}

TEST(XnnpackEtnaKernels, MatmulEmptyInnerDimensionGivesZeros) {
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    const ForcedPath forced(path);
    for (bool transposed : {false, true}) {
      std::vector<float> c(5 * 19, kSentinel);
      const float unused = 0.0f;
      xnn::matmul_f32(&unused, &unused, c.data(), 5, 0, 19, transposed);
      EXPECT_EQ(c, std::vector<float>(5 * 19, 0.0f));
    }
  }
}

// Attention's two products over a 1024-position cache (q times keys laid out
// [heads, head_dim, positions], then probabilities times values), batched by
// head, plus odd batched shapes in both layouts; each path through the
// delegate against the reference, and the paths against each other.
TEST(XnnpackEtnaKernels, MatmulDelegateRunsAttentionShapesOnEveryPath) {
  struct Product {
    size_t batches, m, k, n;
    bool transposed;
  };
  const Product products[] = {
      {4, 8, 32, 1024, false}, {4, 8, 1024, 32, false}, {3, 6, 7, 9, false}, {3, 6, 7, 9, true}, {3, 7, 45, 29, true}};
  for (const Product& p : products) {
    const auto a = pseudo_random(p.batches * p.m * p.k, 41);
    const auto b_plain = pseudo_random(p.batches * p.k * p.n, 42);
    const auto b = p.transposed ? transpose_batches(b_plain, p.batches, p.k, p.n) : b_plain;
    const auto want = reference(a, b_plain, p.batches, p.m, p.k, p.n);
    const int64_t q = static_cast<int64_t>(p.batches), m = static_cast<int64_t>(p.m), k = static_cast<int64_t>(p.k),
                  n = static_cast<int64_t>(p.n);
    const std::vector<int64_t> a_dims{q, m, k},
        b_dims = p.transposed ? std::vector<int64_t>{q, n, k} : std::vector<int64_t>{q, k, n};
    const std::vector<int64_t> c_dims{q, m, n};
    std::vector<std::vector<float>> results;
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(std::string(xnn::dot_path_name(path)) + " k=" + std::to_string(p.k) + " n=" + std::to_string(p.n));
      PayloadBuilder builder;
      auto to_u32 = [](const std::vector<int64_t>& dims) { return std::vector<uint32_t>(dims.begin(), dims.end()); };
      const uint32_t va = builder.input(to_u32(a_dims), 0), vb = builder.input(to_u32(b_dims), 1);
      const uint32_t vc = builder.output(to_u32(c_dims), 2);
      builder.binary(NodeUnion::XNNBatchMatrixMultiply, va, vb, vc, {}, p.transposed ? 0x1 : 0);
      const auto payload = builder.finish(Layout::kConstantRegion, 3);
      xnn::XnnpackModuleContext context(BackendOptions{});
      auto delegate = make_delegate(payload, context, builder.lookup());
      ASSERT_TRUE(delegate) << delegate.error().message;
      LocalTensor ta(ScalarType::kFloat, a_dims), tb(ScalarType::kFloat, b_dims), tc(ScalarType::kFloat, c_dims);
      ta.fill(a);
      tb.fill(b);
      const ForcedPath forced(path);
      Status ran = run_delegate(**delegate, {&ta, &tb, &tc});
      ASSERT_TRUE(ran) << ran.error().message;
      results.push_back(tc.to_vector());
      // Float sums over 1024 products drift ~1e-5 from the double ones on any path.
      EXPECT_TRUE(close_to(results.back(), want, 1e-4f));
    }
    for (size_t i = 1; i < results.size(); ++i) EXPECT_TRUE(close_to(results[i], results[0], 1e-4f));
  }
}

// An attention product reading a [positions, heads * head_dim] cache viewed
// [positions, heads, head_dim] and transposed by `perm` into its B input,
// plain or flagged transposed. When the perm keeps the cache's innermost dim
// among the two matrix dims the transpose is folded into the multiply: the
// workspace holds nothing, and each path gives the very bits it gives with
// the transposed cache materialised as a dense input.
TEST(XnnpackEtnaKernels, MatmulReadsATransposedCacheInPlace) {
  struct Case {
    size_t positions, heads, head_dim, rows;
    std::vector<uint32_t> perm;
    bool transposed_flag, folds;
  };
  const Case cases[] = {
      {1024, 4, 32, 8, {1, 2, 0}, false, true},  // q times keys [heads, head_dim, positions]
      {1024, 4, 32, 1, {1, 2, 0}, false, true},  // one query
      {1024, 4, 32, 8, {1, 0, 2}, false, true},  // probabilities times values [heads, positions, head_dim]
      {1024, 4, 32, 8, {1, 0, 2}, true, true},   // q times keys flagged transposed
      {29, 3, 7, 5, {1, 2, 0}, false, true},     // remainders everywhere
      {29, 3, 7, 5, {1, 0, 2}, false, true},    {29, 3, 7, 5, {1, 0, 2}, true, true},
      {29, 3, 7, 5, {0, 2, 1}, false, true},   // batched by position, heads as columns
      {29, 3, 7, 5, {2, 0, 1}, false, false},  // head_dim as the batch: copied first
  };
  auto to_u32 = [](const std::vector<size_t>& dims) { return std::vector<uint32_t>(dims.begin(), dims.end()); };
  auto to_i64 = [](const std::vector<size_t>& dims) { return std::vector<int64_t>(dims.begin(), dims.end()); };
  for (const Case& c : cases) {
    const std::vector<size_t> cache_dims{c.positions, c.heads * c.head_dim};
    const std::vector<size_t> view_dims{c.positions, c.heads, c.head_dim};
    std::vector<size_t> b_dims;
    for (uint32_t p : c.perm) b_dims.push_back(view_dims[p]);
    const size_t batches = b_dims[0];
    const size_t k = c.transposed_flag ? b_dims[2] : b_dims[1], n = c.transposed_flag ? b_dims[1] : b_dims[2];
    const auto cache = pseudo_random(c.positions * c.heads * c.head_dim, 43);
    const auto a = pseudo_random(batches * c.rows * k, 44);
    // The transposed cache, dense, and as [batches][k][n] for the reference.
    const size_t view_strides[3] = {c.heads * c.head_dim, c.head_dim, 1};
    std::vector<float> b(cache.size());
    size_t at = 0;
    for (size_t i = 0; i < b_dims[0]; ++i)
      for (size_t j = 0; j < b_dims[1]; ++j)
        for (size_t l = 0; l < b_dims[2]; ++l)
          b[at++] = cache[i * view_strides[c.perm[0]] + j * view_strides[c.perm[1]] + l * view_strides[c.perm[2]]];
    const auto b_plain = c.transposed_flag ? transpose_batches(b, batches, n, k) : b;
    const auto want = reference(a, b_plain, batches, c.rows, k, n);
    const std::vector<size_t> a_dims{batches, c.rows, k}, c_dims{batches, c.rows, n};
    const uint32_t flags = c.transposed_flag ? 0x1 : 0;
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(std::string(xnn::dot_path_name(path)) + " positions=" + std::to_string(c.positions) + " perm " +
                   std::to_string(c.perm[0]) + std::to_string(c.perm[1]) + std::to_string(c.perm[2]) +
                   (c.transposed_flag ? " flagged" : ""));
      std::vector<std::vector<float>> results;
      for (bool through_cache : {true, false}) {
        PayloadBuilder builder;
        const uint32_t va = builder.input(to_u32(a_dims), 0);
        const uint32_t vb = builder.input(to_u32(through_cache ? cache_dims : b_dims), 1);
        const uint32_t vc = builder.output(to_u32(c_dims), 2);
        uint32_t operand = vb;
        if (through_cache) {
          const uint32_t view = builder.internal(to_u32(view_dims));
          operand = builder.internal(to_u32(b_dims));
          builder.reshape(to_u32(view_dims), vb, view);
          builder.transpose(c.perm, view, operand);
        }
        builder.binary(NodeUnion::XNNBatchMatrixMultiply, va, operand, vc, {}, flags);
        const auto payload = builder.finish(Layout::kConstantRegion, 3);
        xnn::XnnpackModuleContext context(BackendOptions{});
        auto delegate = make_delegate(payload, context, builder.lookup());
        ASSERT_TRUE(delegate) << delegate.error().message;
        if (through_cache) {
          EXPECT_EQ((*delegate)->declared_workspace_bytes() == 0, c.folds);
        }
        LocalTensor ta(ScalarType::kFloat, to_i64(a_dims));
        LocalTensor tb(ScalarType::kFloat, to_i64(through_cache ? cache_dims : b_dims));
        LocalTensor tc(ScalarType::kFloat, to_i64(c_dims));
        ta.fill(a);
        tb.fill(through_cache ? cache : b);
        const ForcedPath forced(path);
        Status ran = run_delegate(**delegate, {&ta, &tb, &tc});
        ASSERT_TRUE(ran) << ran.error().message;
        results.push_back(tc.to_vector());
        EXPECT_EQ(tb.to_vector(), through_cache ? cache : b);
      }
      EXPECT_TRUE(close_to(results[0], want, 1e-4f));
      EXPECT_EQ(results[0], results[1]);
    }
  }
}

// A view shares its owner's offset; the pair is busy for the union of their
// lifetimes, so a buffer living inside that union never overlaps them.
TEST(XnnpackEtnaKernels, MemoryPlanPlacesViewsWithTheirOwner) {
  std::vector<xnn::BufferLifetime> buffers(4);
  buffers[0] = {256, 0, 1};     // produced at 0, reshaped at 1
  buffers[1] = {256, 1, 5, 0};  // the reshape's output, read until 5
  buffers[2] = {128, 2, 3};     // lives inside the view's lifetime only
  buffers[3] = {256, 3, 6, 1};  // a view of the view
  const xnn::BufferPlacement placement = xnn::place_buffers(buffers);
  EXPECT_EQ(placement.offsets[1], placement.offsets[0]);
  EXPECT_EQ(placement.offsets[3], placement.offsets[0]);
  const size_t owner = placement.offsets[0], other = placement.offsets[2];
  EXPECT_TRUE(other + 128 <= owner || owner + 256 <= other) << owner << " " << other;
  EXPECT_EQ(placement.total_bytes, 256u + 128u);
}

// in -> t = in + in -> r = reshape(t) -> u = r * r -> v = reshape(u) -> out = v + t.
// t is read after its reshape, and u is made while r (t's bytes) is still
// needed, so the views' lifetimes must cover their owners' readers.
TEST(XnnpackEtnaKernels, ReshapesAreViewsAndKeepValues) {
  PayloadBuilder builder;
  const uint32_t in = builder.input({2, 3}, 0), out = builder.output({2, 3}, 1);
  const uint32_t t = builder.internal({2, 3}), r = builder.internal({3, 2}), u = builder.internal({3, 2}),
                 v = builder.internal({2, 3});
  builder.binary(NodeUnion::XNNAdd, in, in, t);
  builder.reshape({3, 2}, t, r);
  builder.binary(NodeUnion::XNNMultiply, r, r, u);
  builder.reshape({2, 3}, u, v);
  builder.binary(NodeUnion::XNNAdd, v, t, out);
  const auto payload = builder.finish(Layout::kConstantRegion, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, builder.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  // Two buffers (t with r, u with v), not four.
  const size_t slot = xnn::round_up(6 * sizeof(float) + xnn::kReadPadding, xnn::kWorkspaceAlignment);
  EXPECT_EQ((*delegate)->declared_workspace_bytes(), 2 * slot);
  const std::vector<float> x = {1, -2, 3, 0.5f, -4, 6};
  LocalTensor input(ScalarType::kFloat, {2, 3}), output(ScalarType::kFloat, {2, 3});
  input.fill(x);
  for (int call = 0; call < 2; ++call) {
    Status ran = run_delegate(**delegate, {&input, &output});
    ASSERT_TRUE(ran) << ran.error().message;
    std::vector<float> want;
    for (float e : x) want.push_back(4 * e * e + 2 * e);
    EXPECT_EQ(output.to_vector(), want);
  }
}

// A reshape of a delegate input read only by etna's kernels is the caller's
// bytes (nothing in the workspace); one XNNPACK reads stays a copy, since
// XNNPACK may read past the end of the caller's buffer.
TEST(XnnpackEtnaKernels, ReshapeOfAnInputIsTheCallersBytesUnlessXnnpackReadsIt) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  for (bool xnnpack_reads : {false, true}) {
    SCOPED_TRACE(xnnpack_reads ? "read by XNNPACK" : "read by a transpose");
    PayloadBuilder builder;
    const uint32_t in = builder.input({2, 3}, 0), out = builder.output({2, 3}, 1);
    const uint32_t r = builder.internal({3, 2});
    builder.reshape({3, 2}, in, r);
    uint32_t last = r;
    if (xnnpack_reads) {
      last = builder.internal({3, 2});
      builder.binary(NodeUnion::XNNAdd, r, r, last);
    }
    builder.transpose({1, 0}, last, out);
    const auto payload = builder.finish(Layout::kConstantRegion, 2);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context, builder.lookup());
    ASSERT_TRUE(delegate) << delegate.error().message;
    const size_t slot = xnn::round_up(6 * sizeof(float) + xnn::kReadPadding, xnn::kWorkspaceAlignment);
    EXPECT_EQ((*delegate)->declared_workspace_bytes(), xnnpack_reads ? 2 * slot : 0u);
    LocalTensor input(ScalarType::kFloat, {2, 3}), output(ScalarType::kFloat, {2, 3});
    input.fill(x);
    Status ran = run_delegate(**delegate, {&input, &output});
    ASSERT_TRUE(ran) << ran.error().message;
    const float scale = xnnpack_reads ? 2.0f : 1.0f;  // r viewed as [3, 2] = {{1, 2}, {3, 4}, {5, 6}}, transposed
    const std::vector<float> want = {1 * scale, 3 * scale, 5 * scale, 2 * scale, 4 * scale, 6 * scale};
    EXPECT_EQ(output.to_vector(), want);
    EXPECT_EQ(input.to_vector(), x);
  }
}

// A value read only by the reshape that makes a delegate output is written
// into the caller's output: nothing in the workspace, nothing copied. Read by
// anything else too, it keeps its own buffer.
TEST(XnnpackEtnaKernels, ValueReshapedIntoAnOutputIsTheCallersBytes) {
  const std::vector<float> x = {1, -2, 3, 0.5f, -4, 6};
  for (bool read_again : {false, true}) {
    SCOPED_TRACE(read_again ? "also read by an Add" : "read by the reshape only");
    PayloadBuilder builder;
    const uint32_t in = builder.input({2, 3}, 0), out = builder.output({3, 2}, 1);
    const uint32_t t = builder.internal({2, 3});
    builder.binary(NodeUnion::XNNAdd, in, in, t);
    builder.reshape({3, 2}, t, out);
    uint32_t externals = 2;
    if (read_again) {
      builder.binary(NodeUnion::XNNAdd, t, in, builder.output({2, 3}, 2));
      externals = 3;
    }
    const auto payload = builder.finish(Layout::kConstantRegion, externals);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context, builder.lookup());
    ASSERT_TRUE(delegate) << delegate.error().message;
    const size_t slot = xnn::round_up(6 * sizeof(float) + xnn::kReadPadding, xnn::kWorkspaceAlignment);
    EXPECT_EQ((*delegate)->declared_workspace_bytes(), read_again ? slot : 0u);
    LocalTensor input(ScalarType::kFloat, {2, 3}), output(ScalarType::kFloat, {3, 2}),
        other(ScalarType::kFloat, {2, 3});
    input.fill(x);
    std::vector<LocalTensor*> args = {&input, &output};
    if (read_again) args.push_back(&other);
    for (int call = 0; call < 2; ++call) {
      Status ran = run_delegate(**delegate, args);
      ASSERT_TRUE(ran) << ran.error().message;
      std::vector<float> twice, thrice;
      for (float e : x) {
        twice.push_back(2 * e);
        thrice.push_back(3 * e);
      }
      EXPECT_EQ(output.to_vector(), twice);
      if (read_again) {
        EXPECT_EQ(other.to_vector(), thrice);
      }
    }
  }
}

// GELU's vectorized erf against the exact form in double, on every path: a
// sweep over [-10, 10] plus far-out values, with a count that leaves a tail
// after the 8-lane blocks. Every vector path runs the same AVX2 code.
TEST(XnnpackEtnaKernels, GeluMatchesTheErfFormOnEveryPath) {
  std::vector<float> x;
  for (int i = 0; i < 3000; ++i) x.push_back(-10.0f + 20.0f * static_cast<float>(i) / 2999.0f);
  for (float far : {-1e30f, -50.0f, -0.0f, 1e-20f, 50.0f, 1e30f}) x.push_back(far);
  const int64_t count = static_cast<int64_t>(x.size());
  ASSERT_NE(count % 8, 0);
  std::vector<float> want;
  for (float v : x) want.push_back(static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))));
  std::vector<float> vector_result;
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    PayloadBuilder builder;
    const uint32_t in = builder.input({1, static_cast<uint32_t>(count)}, 0);
    const uint32_t out = builder.output({1, static_cast<uint32_t>(count)}, 1);
    builder.unary(NodeUnion::XNNGelu, in, out);
    const auto payload = builder.finish(Layout::kConstantRegion, 2);
    xnn::XnnpackModuleContext context(BackendOptions{});
    auto delegate = make_delegate(payload, context, builder.lookup());
    ASSERT_TRUE(delegate) << delegate.error().message;
    LocalTensor input(ScalarType::kFloat, {1, count}), output(ScalarType::kFloat, {1, count});
    input.fill(x);
    const ForcedPath forced(path);
    Status ran = run_delegate(**delegate, {&input, &output});
    ASSERT_TRUE(ran) << ran.error().message;
    EXPECT_TRUE(close_to(output.to_vector(), want, 1e-6f));
    if (!xnn::path_has_avx2(path)) continue;
    if (vector_result.empty()) vector_result = output.to_vector();
    EXPECT_EQ(output.to_vector(), vector_result) << "not the AVX2 kernel";
  }
}

// Distance in units in the last place between two finite floats of any signs.
int64_t ulp_distance(float a, float b) {
  const auto ordered = [](float f) {
    int32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits < 0 ? -static_cast<int64_t>(bits & 0x7fffffff) : static_cast<int64_t>(bits);
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Runs one fp32 unary node over `x` (shape [1, x.size()]) on `path`.
std::vector<float> run_unary(NodeUnion type, const std::vector<float>& x, xnn::DotPath path) {
  PayloadBuilder builder;
  const auto count = static_cast<uint32_t>(x.size());
  const uint32_t in = builder.input({1, count}, 0);
  const uint32_t out = builder.output({1, count}, 1);
  builder.unary(type, in, out);
  return run_on_path(builder, {1, static_cast<int64_t>(count)}, x, {1, static_cast<int64_t>(count)}, path);
}

// An even spread of finite float bit patterns, each with both signs: every
// magnitude from denormals to the largest float.
std::vector<float> spread_of_finite_floats() {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 40009u) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    x.push_back(v);
    x.push_back(-v);
  }
  return x;
}

// Tanh on every path within 2 ulp of tanh in double rounded to float, over
// an even spread of bit patterns of both signs (every magnitude from
// denormals to the largest float) and values around the thresholds the
// vector code switches at (2^-12 and the cap at 20). Specials: ±0 keep
// their sign, ±Inf give ±1, NaN of either sign stays NaN.
TEST(XnnpackEtnaKernels, TanhWithinTwoUlpOfDoubleOnEveryPath) {
  std::vector<float> x = spread_of_finite_floats();
  for (float center : {0x1p-12f, 0.5f, 1.0f, 9.0f, 20.0f}) {
    float up = center, down = center;
    for (int i = 0; i < 64; ++i) {
      x.push_back(up);
      x.push_back(-down);
      up = std::nextafter(up, 100.0f);
      down = std::nextafter(down, 0.0f);
    }
  }
  const size_t finite = x.size();
  const float inf = std::numeric_limits<float>::infinity();
  for (float special :
       {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(special);
  }
  ASSERT_NE(x.size() % 8, 0u);
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    const std::vector<float> y = run_unary(NodeUnion::XNNTanh, x, path);
    ASSERT_EQ(y.size(), x.size());
    int64_t worst = 0;
    float worst_at = 0;
    for (size_t i = 0; i < finite; ++i) {
      const int64_t d = ulp_distance(y[i], static_cast<float>(std::tanh(static_cast<double>(x[i]))));
      if (d > worst) {
        worst = d;
        worst_at = x[i];
      }
    }
    EXPECT_LE(worst, 2) << "at x = " << worst_at;
    EXPECT_EQ(y[finite], 0.0f);
    EXPECT_FALSE(std::signbit(y[finite]));
    EXPECT_EQ(y[finite + 1], 0.0f);
    EXPECT_TRUE(std::signbit(y[finite + 1]));
    EXPECT_EQ(y[finite + 2], 1.0f);
    EXPECT_EQ(y[finite + 3], -1.0f);
    EXPECT_TRUE(std::isnan(y[finite + 4]));
    EXPECT_TRUE(std::isnan(y[finite + 5]));
  }
}

// Exp and Log on every path within 2 ulp of the double function rounded to
// float over a spread of bit patterns of both signs (NaN where it gives
// NaN, infinities where it overflows), and their specials.
TEST(XnnpackEtnaKernels, ExpAndLogWithinTwoUlpOfDoubleOnEveryPath) {
  std::vector<float> x = spread_of_finite_floats();
  for (float v = -110.0f; v <= 100.0f; v += 0.37f) x.push_back(v);
  const size_t finite = x.size();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float special : {0.0f, -0.0f, inf, -inf, nan, -nan, 1.0f}) x.push_back(special);
  ASSERT_NE(x.size() % 8, 0u);
  struct Case {
    NodeUnion type;
    double (*reference)(double);
    std::vector<float> specials;  // for 0, -0, Inf, -Inf, NaN, -NaN, 1
  };
  const Case cases[] = {
      {NodeUnion::XNNExp, [](double v) { return std::exp(v); }, {1, 1, inf, 0, nan, nan, 2.7182817f}},
      {NodeUnion::XNNLog, [](double v) { return std::log(v); }, {-inf, -inf, inf, nan, nan, nan, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fbx::EnumNameNodeUnion(c.type));
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(xnn::dot_path_name(path));
      const std::vector<float> y = run_unary(c.type, x, path);
      ASSERT_EQ(y.size(), x.size());
      int64_t worst = 0;
      float worst_at = 0;
      size_t mismatched_specials = 0;
      for (size_t i = 0; i < finite; ++i) {
        const float want = static_cast<float>(c.reference(static_cast<double>(x[i])));
        if (std::isnan(want) || std::isinf(want)) {
          if (!(std::isnan(want) ? std::isnan(y[i]) : y[i] == want)) ++mismatched_specials;
          continue;
        }
        const int64_t d = ulp_distance(y[i], want);
        if (d > worst) {
          worst = d;
          worst_at = x[i];
        }
      }
      EXPECT_LE(worst, 2) << "at x = " << worst_at;
      EXPECT_EQ(mismatched_specials, 0u);
      for (size_t s = 0; s < c.specials.size(); ++s) {
        const float got = y[finite + s], want = c.specials[s];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "special " << s;
        } else {
          EXPECT_EQ(got, want) << "special " << s;
        }
      }
    }
  }
}

// Image layout changes (NCHW <-> NHWC) with sizes that leave remainders
// after the 8 x 8 register tiles and the 8-pixel blocks of the 3-plane
// interleave, a few channels other than 3, and permutations that keep the
// innermost dim (rows copied whole), on every path: each output element is
// the input element the permutation names.
TEST(XnnpackEtnaKernels, TransposesBetweenImageLayoutsOnEveryPath) {
  struct Case {
    std::vector<uint32_t> dims, perm;
  };
  const Case cases[] = {
      {{2, 3, 9, 21}, {0, 2, 3, 1}},                                  // RGB planes to pixels
      {{1, 3, 4, 4}, {0, 2, 3, 1}},                                   // fewer than 8 pixels per row
      {{1, 5, 6, 11}, {0, 2, 3, 1}},                                  // 5 planes: one strided pass per plane
      {{1, 8, 7, 19}, {0, 2, 3, 1}},                                  // 8 planes: register tiles
      {{2, 7, 5, 8}, {0, 3, 1, 2}},                                   // NHWC back to NCHW, 8 channels
      {{1, 13, 17, 19}, {0, 3, 1, 2}},                                // remainders on both sides of the tiles
      {{3, 17, 19}, {0, 2, 1}},        {{2, 6, 3, 8}, {0, 2, 1, 3}},  // rows of 32 bytes kept whole (inlined chunks)
      {{1, 5, 4, 32}, {0, 2, 1, 3}},                                  // 128 bytes (a head's slice of a cache position)
      {{1, 5, 4, 33}, {0, 2, 1, 3}},                                  // 132 bytes (a library copy)
  };
  for (const Case& c : cases) {
    const size_t rank = c.dims.size();
    size_t count = 1;
    for (uint32_t d : c.dims) count *= d;
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i);
    std::vector<uint32_t> out_dims;
    for (uint32_t p : c.perm) out_dims.push_back(c.dims[p]);
    std::vector<size_t> in_strides(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * c.dims[d + 1];
    std::vector<float> want(count);
    std::vector<size_t> index(rank, 0);
    for (size_t k = 0; k < count; ++k) {
      size_t source = 0;
      for (size_t d = 0; d < rank; ++d) source += index[d] * in_strides[c.perm[d]];
      want[k] = x[source];
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < out_dims[d]) break;
        index[d] = 0;
      }
    }
    const std::vector<int64_t> in_sizes(c.dims.begin(), c.dims.end()), out_sizes(out_dims.begin(), out_dims.end());
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(std::string(xnn::dot_path_name(path)) + " dims " + std::to_string(c.dims[1]) + "x" +
                   std::to_string(c.dims[2]));
      PayloadBuilder builder;
      const uint32_t in = builder.input(c.dims, 0), out = builder.output(out_dims, 1);
      builder.transpose(c.perm, in, out);
      EXPECT_EQ(run_on_path(builder, in_sizes, x, out_sizes, path), want);
    }
  }
}

// Channel concatenation of NHWC maps whose pixels hold 16, 32, 128 bytes
// (copied as inlined chunks), 12 and 132 bytes (library copies): every
// output pixel holds each input's channels in input order.
TEST(XnnpackEtnaKernels, ConcatenatesShortAndLongChannelRows) {
  // Rows of 16, 4, 12, 8 and 132 bytes.
  const std::vector<uint32_t> channels = {4, 1, 3, 2, 33};
  const uint32_t height = 3, width = 5, pixels = height * width;
  uint32_t total = 0;
  for (uint32_t c : channels) total += c;
  PayloadBuilder builder;
  std::vector<uint32_t> inputs;
  for (size_t i = 0; i < channels.size(); ++i) {
    inputs.push_back(builder.input({1, height, width, channels[i]}, static_cast<uint32_t>(i)));
  }
  const uint32_t out = builder.output({1, height, width, total}, static_cast<uint32_t>(channels.size()));
  builder.concatenate(3, inputs, out);
  const auto payload = builder.finish(Layout::kConstantRegion, static_cast<uint32_t>(channels.size() + 1));
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, builder.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  std::vector<std::unique_ptr<LocalTensor>> tensors;
  std::vector<LocalTensor*> args;
  std::vector<float> want(size_t{pixels} * total);
  uint32_t first = 0;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::vector<float> x(size_t{pixels} * channels[i]);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(1000 * i + k);
    for (size_t p = 0; p < pixels; ++p) {
      for (size_t c = 0; c < channels[i]; ++c) want[p * total + first + c] = x[p * channels[i] + c];
    }
    first += channels[i];
    tensors.push_back(
        std::make_unique<LocalTensor>(ScalarType::kFloat, std::vector<int64_t>{1, height, width, channels[i]}));
    tensors.back()->fill(x);
    args.push_back(tensors.back().get());
  }
  LocalTensor output(ScalarType::kFloat, {1, height, width, total});
  args.push_back(&output);
  Status ran = run_delegate(**delegate, args);
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_EQ(output.to_vector(), want);
}

// Slices whose rows (the output's last dim) are one or two elements a fixed
// stride apart (the even or odd half of interleaved pairs, as a rotary
// embedding takes them), whole inner dims, and rank 1, against indexing.
TEST(XnnpackEtnaKernels, SlicesShortAndStridedRows) {
  struct Slice {
    std::vector<uint32_t> dims, offsets, sizes;
  };
  const Slice slices[] = {
      {{3, 5, 6, 2}, {0, 0, 0, 1}, {3, 5, 6, 1}},  // odd elements of pairs: 4-byte rows
      {{3, 5, 6, 2}, {0, 0, 0, 0}, {3, 5, 6, 1}},  // even elements
      {{3, 5, 6, 4}, {1, 2, 1, 2}, {2, 3, 4, 2}},  // 8-byte rows inside every dim
      {{3, 5, 6, 2}, {0, 1, 0, 0}, {3, 4, 6, 2}},  // whole inner dims
      {{12}, {3}, {5}},
  };
  auto to_i64 = [](const std::vector<uint32_t>& dims) { return std::vector<int64_t>(dims.begin(), dims.end()); };
  auto count_of = [](const std::vector<uint32_t>& dims) {
    size_t count = 1;
    for (uint32_t d : dims) count *= d;
    return count;
  };
  for (const Slice& slice : slices) {
    SCOPED_TRACE("slice of rank " + std::to_string(slice.dims.size()) + ", last dim " +
                 std::to_string(slice.sizes.back()));
    const size_t rank = slice.dims.size();
    std::vector<float> x(count_of(slice.dims));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    std::vector<float> want(count_of(slice.sizes));
    for (size_t i = 0; i < want.size(); ++i) {
      size_t rest = i, source = 0, stride = 1;
      for (size_t d = rank; d-- > 0;) {
        source += (rest % slice.sizes[d] + slice.offsets[d]) * stride;
        rest /= slice.sizes[d];
        stride *= slice.dims[d];
      }
      want[i] = x[source];
    }
    PayloadBuilder builder;
    const uint32_t in = builder.input(slice.dims, 0), out = builder.output(slice.sizes, 1);
    builder.slice(slice.offsets, slice.sizes, in, out);
    const auto results = run_graph(builder, {Io(to_i64(slice.dims), x)}, {Io(to_i64(slice.sizes))});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0], want);
  }
}

// Transposed convolutions whose kernel equals their stride (each input pixel
// writes its own patch): patch rows of 8 or more outputs (one product per
// row) and narrower ones (the row of pixels as columns), odd channel counts,
// batches, no bias and output bounds, on every path, against sums in double.
TEST(XnnpackEtnaKernels, PatchDeconvolutionMatchesSumsOnEveryPath) {
  struct Case {
    uint32_t batch, height, width, in_channels, out_channels, kernel_h, kernel_w;
    bool bias;
    float low, high;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {1, 4, 9, 8, 8, 2, 2, true, 0.0f, inf},      // 16 outputs per patch row
      {2, 3, 11, 5, 3, 3, 3, true, -0.2f, 0.3f},   // 9
      {1, 2, 5, 17, 5, 2, 2, false, -inf, inf},    // 10, odd input channels
      {1, 6, 13, 8, 1, 2, 2, true, -inf, inf},     // 2: by pixel
      {2, 3, 7, 3, 2, 1, 3, false, -0.1f, 0.25f},  // 6: by pixel, one row per patch
      {1, 1, 1, 4, 7, 2, 1, true, -inf, inf},      // 7: a single pixel
  };
  for (const Case& c : cases) {
    const uint32_t out_h = c.height * c.kernel_h, out_w = c.width * c.kernel_w;
    const size_t filter_count = size_t{c.out_channels} * c.kernel_h * c.kernel_w * c.in_channels;
    const auto filter = pseudo_random(filter_count, 51), bias = pseudo_random(c.out_channels, 52);
    const auto x = pseudo_random(size_t{c.batch} * c.height * c.width * c.in_channels, 53);
    std::vector<float> want(size_t{c.batch} * out_h * out_w * c.out_channels);
    for (size_t n = 0; n < c.batch; ++n)
      for (size_t oy = 0; oy < out_h; ++oy)
        for (size_t ox = 0; ox < out_w; ++ox)
          for (size_t co = 0; co < c.out_channels; ++co) {
            const size_t iy = oy / c.kernel_h, ky = oy % c.kernel_h, ix = ox / c.kernel_w, kx = ox % c.kernel_w;
            double sum = c.bias ? bias[co] : 0.0;
            for (size_t ci = 0; ci < c.in_channels; ++ci) {
              sum += double(x[((n * c.height + iy) * c.width + ix) * c.in_channels + ci]) *
                     filter[((co * c.kernel_h + ky) * c.kernel_w + kx) * c.in_channels + ci];
            }
            want[((n * out_h + oy) * out_w + ox) * c.out_channels + co] =
                std::min(c.high, std::max(c.low, static_cast<float>(sum)));
          }
    const std::vector<int64_t> in_sizes{c.batch, c.height, c.width, c.in_channels};
    const std::vector<int64_t> out_sizes{c.batch, out_h, out_w, c.out_channels};
    for (xnn::DotPath path : xnn::available_dot_paths()) {
      SCOPED_TRACE(std::string(xnn::dot_path_name(path)) + " " + std::to_string(c.in_channels) + " -> " +
                   std::to_string(c.out_channels) + " kernel " + std::to_string(c.kernel_h) + "x" +
                   std::to_string(c.kernel_w));
      PayloadBuilder builder;
      PayloadBuilder::ConvParams p;
      p.kernel_h = p.stride_h = c.kernel_h;
      p.kernel_w = p.stride_w = c.kernel_w;
      p.group_in = c.in_channels;
      p.group_out = c.out_channels;
      const uint32_t in = builder.input({c.batch, c.height, c.width, c.in_channels}, 0);
      const uint32_t f = builder.constant({c.out_channels, c.kernel_h, c.kernel_w, c.in_channels}, filter);
      const uint32_t b = c.bias ? builder.constant({c.out_channels}, bias) : PayloadBuilder::kNone;
      const uint32_t out = builder.output({c.batch, out_h, out_w, c.out_channels}, 1);
      builder.convolution(NodeUnion::XNNConvTranspose2d, p, in, f, b, out, std::make_pair(c.low, c.high));
      // Two calls: the second reuses the per-thread scratch.
      EXPECT_TRUE(close_to(run_on_path(builder, in_sizes, x, out_sizes, path, 2), want, 1e-5f));
    }
  }
}

}  // namespace
}  // namespace etna::test
