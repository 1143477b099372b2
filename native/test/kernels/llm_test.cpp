// llama:: operators: attention over a KV cache checked against a direct
// double-precision formulation (explicit mask matrix, softmax, weighted sum),
// and cache updates that leave everything else (and, on error, everything)
// untouched.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <vector>

#include "core/parallel.h"
#include "core/thread_pool.h"
#include "attention_test_support.h"
#include "kernel_test_support.h"
#include "kernels/attention.h"

namespace etna::kernel_test {
namespace {

using kernels::attention_path_name;
using kernels::AttentionPath;
using kernels::available_attention_paths;

struct AttentionCase {
  int64_t batch, sequence, heads, kv_heads, head_dim, capacity, start_pos;
  bool causal;
};

// out[b, r, h, :] computed in double. Without a mask the keys are positions
// 0 .. start_pos + sequence; with one, every cache position, and mask[r, j]
// is (*mask)[r * capacity + j]. Causal rows never read the keys and values
// past their position (ExecuTorch's kernel does not: that part of the cache
// may not be written yet), so a NaN there changes nothing.
std::vector<float> reference_attention(const AttentionCase& c, const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, const std::vector<float>* mask, double scale) {
  const int64_t visible = mask ? c.capacity : c.start_pos + c.sequence;
  std::vector<float> out(static_cast<size_t>(c.batch * c.sequence * c.heads * c.head_dim));
  auto q_at = [&](int64_t b, int64_t s, int64_t h, int64_t d) {
    return q[static_cast<size_t>(((b * c.sequence + s) * c.heads + h) * c.head_dim + d)];
  };
  auto kv_at = [&](const std::vector<float>& t, int64_t b, int64_t s, int64_t h, int64_t d) {
    return t[static_cast<size_t>(((b * c.capacity + s) * c.kv_heads + h) * c.head_dim + d)];
  };
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kvh = h * c.kv_heads / c.heads;
      for (int64_t r = 0; r < c.sequence; ++r) {
        const int64_t seen = c.causal ? c.start_pos + r + 1 : visible;
        std::vector<double> logits(static_cast<size_t>(seen));
        for (int64_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) dot += double(q_at(b, r, h, d)) * kv_at(k, b, j, kvh, d);
          const double bias = mask ? (*mask)[static_cast<size_t>(r * visible + j)] : 0.0;
          logits[static_cast<size_t>(j)] = dot * scale + bias;
        }
        // std::max(top, NaN) is top: NaN logits are skipped here and make the total NaN below.
        double top = -std::numeric_limits<double>::infinity();
        for (double x : logits) top = std::max(top, x);
        double total = 0;
        for (double& x : logits) total += (x = std::exp(x - top));
        for (int64_t d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < seen; ++j) acc += logits[static_cast<size_t>(j)] / total * kv_at(v, b, j, kvh, d);
          out[static_cast<size_t>(((b * c.sequence + r) * c.heads + h) * c.head_dim + d)] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

void expect_near_all(const std::vector<float>& actual, const std::vector<float>& expected, float tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
}

// Runs llama::custom_sdpa.out with dropout_p 0; a null mask and a scale of 0
// are None.
Status run_custom_sdpa(Tensor& q, Tensor& k, Tensor& v, int64_t start_pos, Tensor* mask, bool causal, double scale,
                       Tensor& out, pthreadpool_t pool = nullptr) {
  Args args;
  args.tensor(q).tensor(k).tensor(v).integer(start_pos).optional_tensor(mask).real(0.0).boolean(causal);
  if (scale != 0) {
    args.real(scale);
  } else {
    args.none();
  }
  args.tensor(out).same_as(8);
  return run_kernel("llama::custom_sdpa.out", args, pool);
}

// One llama::sdpa_with_kv_cache.out call for case c: random q, c.sequence
// new key and value rows, random caches of c.capacity rows, and out.
struct KvCacheCall {
  static size_t elements(const AttentionCase& c, int64_t rows, int64_t heads) {
    return static_cast<size_t>(c.batch * rows * heads * c.head_dim);
  }

  KvCacheCall(const AttentionCase& c, Lcg rng)
      : c(c),
        q_values(rng.floats(elements(c, c.sequence, c.heads))),
        k_new(rng.floats(elements(c, c.sequence, c.kv_heads))),
        v_new(rng.floats(elements(c, c.sequence, c.kv_heads))),
        k_cache_values(rng.floats(elements(c, c.capacity, c.kv_heads))),
        v_cache_values(rng.floats(elements(c, c.capacity, c.kv_heads))),
        q(store.make<float>({c.batch, c.sequence, c.heads, c.head_dim}, q_values)),
        k(store.make<float>({c.batch, c.sequence, c.kv_heads, c.head_dim}, k_new)),
        v(store.make<float>({c.batch, c.sequence, c.kv_heads, c.head_dim}, v_new)),
        k_cache(store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, k_cache_values)),
        v_cache(store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, v_cache_values)),
        out(store.make_empty(ScalarType::kFloat, {c.batch, c.sequence, c.heads, c.head_dim})) {}

  // At the case's start_pos, with its sequence as seq_len, its causality,
  // dropout_p 0 and no scale; a null mask is None.
  Status run(Tensor* mask) {
    Args args;
    args.tensor(q).tensor(k).tensor(v).tensor(k_cache).tensor(v_cache).integer(c.start_pos).integer(c.sequence);
    args.optional_tensor(mask).real(0.0).boolean(c.causal).none().tensor(out).same_as(11);
    return run_kernel("llama::sdpa_with_kv_cache.out", args);
  }

  // `cache` values with the `rows` written at start_pos, as the call leaves a cache.
  std::vector<float> updated(std::vector<float> cache, const std::vector<float>& rows) const {
    const int64_t row = c.kv_heads * c.head_dim;
    for (int64_t b = 0; b < c.batch; ++b) {
      std::copy_n(rows.begin() + b * c.sequence * row, c.sequence * row,
                  cache.begin() + (b * c.capacity + c.start_pos) * row);
    }
    return cache;
  }

  const AttentionCase c;
  TensorStore store;
  const std::vector<float> q_values, k_new, v_new, k_cache_values, v_cache_values;
  Tensor &q, &k, &v, &k_cache, &v_cache, &out;
};

class CustomSdpa : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CustomSdpa, MatchesDirectFormulation) {
  const AttentionCase c = GetParam();
  Lcg rng(17);
  TensorStore store;
  const auto q_values = rng.floats(static_cast<size_t>(c.batch * c.sequence * c.heads * c.head_dim));
  const auto k_values = rng.floats(static_cast<size_t>(c.batch * c.capacity * c.kv_heads * c.head_dim));
  const auto v_values = rng.floats(static_cast<size_t>(c.batch * c.capacity * c.kv_heads * c.head_dim));
  Tensor& q = store.make<float>({c.batch, c.sequence, c.heads, c.head_dim}, q_values);
  Tensor& k = store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, k_values);
  Tensor& v = store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, v_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {c.batch, c.sequence, c.heads, c.head_dim});
  ASSERT_TRUE(is_ok(run_custom_sdpa(q, k, v, c.start_pos, nullptr, c.causal, 0.0, out)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  expect_near_all(values_of<float>(out), reference_attention(c, q_values, k_values, v_values, nullptr, scale), 2e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CustomSdpa,
    ::testing::Values(AttentionCase{1, 1, 2, 2, 8, 16, 0, true},    // first decode step
                      AttentionCase{1, 1, 4, 2, 8, 16, 9, true},    // decode with grouped heads
                      AttentionCase{1, 5, 4, 1, 16, 16, 3, true},   // chunked prefill after 3 tokens, one kv head
                      AttentionCase{2, 4, 2, 2, 4, 8, 4, true},     // batch 2, fills the cache exactly
                      AttentionCase{1, 3, 2, 2, 8, 10, 2, false},   // non-causal: every visible key
                      AttentionCase{1, 6, 6, 3, 8, 12, 0, true}));  // prefill from position 0

TEST(CustomSdpa, AddsMaskAndUsesExplicitScale) {
  const AttentionCase c{1, 2, 2, 1, 4, 6, 1, false};
  Lcg rng(5);
  TensorStore store;
  const auto q_values = rng.floats(16);
  const auto k_values = rng.floats(24);
  const auto v_values = rng.floats(24);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> mask_values = {0.0f, -1.0f, 0.5f, -inf, -inf, -inf, -inf, 0.0f, 2.0f, -inf, -inf, -inf};
  Tensor& q = store.make<float>({1, 2, 2, 4}, q_values);
  Tensor& k = store.make<float>({1, 6, 1, 4}, k_values);
  Tensor& v = store.make<float>({1, 6, 1, 4}, v_values);
  Tensor& mask = store.make<float>({2, 6}, mask_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  ASSERT_TRUE(is_ok(run_custom_sdpa(q, k, v, 1, &mask, false, 0.25, out)));
  expect_near_all(values_of<float>(out), reference_attention(c, q_values, k_values, v_values, &mask_values, 0.25),
                  2e-5f);
}

// ExecuTorch >= 0.7: with a mask, every key of the cache takes part and the
// mask is [sequence, capacity]. Keys past start_pos + sequence get finite
// mask values here, so a kernel that stops at start_pos + sequence differs.
TEST(CustomSdpa, MaskCoversTheWholeCache) {
  const AttentionCase c{1, 3, 4, 2, 8, 8, 2, false};
  Lcg rng(23);
  TensorStore store;
  const auto q_values = rng.floats(static_cast<size_t>(c.sequence * c.heads * c.head_dim));
  const auto k_values = rng.floats(static_cast<size_t>(c.capacity * c.kv_heads * c.head_dim));
  const auto v_values = rng.floats(static_cast<size_t>(c.capacity * c.kv_heads * c.head_dim));
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> mask_values = {
      0.0f, -0.5f, 0.25f, -inf, 1.0f,  0.0f,  -2.0f, 0.75f,  // row 0 sees keys past position 2
      -inf, 0.0f,  0.0f,  0.5f, -inf,  -1.0f, 0.0f,  -inf,   //
      1.5f, -inf,  0.0f,  0.0f, 0.25f, -inf,  -inf,  0.0f,   //
  };
  Tensor& q = store.make<float>({1, 3, 4, 8}, q_values);
  Tensor& k = store.make<float>({1, 8, 2, 8}, k_values);
  Tensor& v = store.make<float>({1, 8, 2, 8}, v_values);
  Tensor& mask = store.make<float>({3, 8}, mask_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 3, 4, 8});
  ASSERT_TRUE(is_ok(run_custom_sdpa(q, k, v, c.start_pos, &mask, false, 0.0, out)));
  const double scale = 1.0 / std::sqrt(8.0);
  expect_near_all(values_of<float>(out), reference_attention(c, q_values, k_values, v_values, &mask_values, scale),
                  2e-5f);

  // A mask as wide as start_pos + sequence only (the rule before ExecuTorch 0.7) is refused.
  Tensor& narrow = store.make<float>({3, 5}, std::vector<float>(15, 0.0f));
  EXPECT_TRUE(
      fails_with(run_custom_sdpa(q, k, v, c.start_pos, &narrow, false, 0.0, out), {"attn_mask", "must be [3, 8]"}));
}

TEST(SdpaWithKvCache, MaskCoversTheWholeCache) {
  const AttentionCase c{1, 2, 2, 2, 4, 6, 1, false};
  KvCacheCall call(c, Lcg(29));
  const std::vector<float> mask_values = {0.0f, 0.5f, -1.0f, 0.0f, 0.25f, -0.75f, -0.25f, 0.0f, 0.0f, 1.0f, 0.0f, 0.5f};
  Tensor& mask = call.store.make<float>({2, 6}, mask_values);
  ASSERT_TRUE(is_ok(call.run(&mask)));
  expect_near_all(values_of<float>(call.out),
                  reference_attention(c, call.q_values, call.updated(call.k_cache_values, call.k_new),
                                      call.updated(call.v_cache_values, call.v_new), &mask_values, 0.5),
                  2e-5f);
}

TEST(CustomSdpa, RefusesBadShapes) {
  TensorStore store;
  Tensor& q = store.make_empty(ScalarType::kFloat, {1, 2, 3, 4});
  Tensor& k = store.make_empty(ScalarType::kFloat, {1, 8, 2, 4});
  Tensor& v = store.make_empty(ScalarType::kFloat, {1, 8, 2, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 3, 4});
  EXPECT_TRUE(fails_with(run_custom_sdpa(q, k, v, 0, nullptr, true, 0.0, out), {"multiple of key/value heads"}));

  Tensor& q2 = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  Tensor& out2 = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  EXPECT_TRUE(fails_with(run_custom_sdpa(q2, k, v, 7, nullptr, true, 0.0, out2), {"start_pos 7", "exceeds key"}));

  Tensor& mask = store.make_empty(ScalarType::kFloat, {2, 2});
  EXPECT_TRUE(fails_with(run_custom_sdpa(q2, k, v, 0, &mask, true, 0.0, out2), {"cannot both be set"}));
}

// ---------------------------------------------------------------------------
// The tiled kernel: every vector path the CPU has, on one thread and split
// over 2 and 3 threads (with the real minimum work per task and with none, so
// even small shapes split into single row blocks), against the double
// reference, and bit for bit the same whatever the thread count.

struct SdpaInputs {
  AttentionCase c;
  std::vector<float> q, k, v;
  std::vector<float> mask;  // empty: none
  double scale = 0;         // 0: the default 1 / sqrt(head_dim)
  double effective_scale() const { return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)); }
};

// A mask that hides about a fifth of the cache from each row, and never all of it.
std::vector<float> random_mask(Lcg& rng, int64_t rows, int64_t capacity) {
  std::vector<float> mask = rng.floats(static_cast<size_t>(rows * capacity), -1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 1; j < capacity; ++j) {
      if (rng.next() % 5 == 0) mask[static_cast<size_t>(r * capacity + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  return mask;
}

SdpaInputs random_inputs(const AttentionCase& c, bool masked, uint64_t seed) {
  Lcg rng(seed);
  SdpaInputs in{c, {}, {}, {}, {}, 0};
  in.q = rng.floats(static_cast<size_t>(c.batch * c.sequence * c.heads * c.head_dim));
  in.k = rng.floats(static_cast<size_t>(c.batch * c.capacity * c.kv_heads * c.head_dim));
  in.v = rng.floats(static_cast<size_t>(c.batch * c.capacity * c.kv_heads * c.head_dim));
  if (masked) in.mask = random_mask(rng, c.sequence, c.capacity);
  return in;
}

// The kernel's output; it starts as NaN, so an element no task wrote shows.
std::vector<float> run_sdpa(const SdpaInputs& in, pthreadpool_t pool) {
  const AttentionCase& c = in.c;
  TensorStore store;
  Tensor& q = store.make<float>({c.batch, c.sequence, c.heads, c.head_dim}, in.q);
  Tensor& k = store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, in.k);
  Tensor& v = store.make<float>({c.batch, c.capacity, c.kv_heads, c.head_dim}, in.v);
  Tensor& out = store.make<float>({c.batch, c.sequence, c.heads, c.head_dim},
                                  std::vector<float>(in.q.size(), std::numeric_limits<float>::quiet_NaN()));
  Tensor* mask = in.mask.empty() ? nullptr : &store.make<float>({c.sequence, c.capacity}, in.mask);
  const Status status = run_custom_sdpa(q, k, v, c.start_pos, mask, c.causal, in.scale, out, pool);
  EXPECT_TRUE(is_ok(status));
  return values_of<float>(out);
}

// On every path: the reference on one thread, the portable path's bits, and
// the same bits on 2 and 3 threads.
void check_every_path_and_thread_count(const SdpaInputs& in, float tolerance) {
  const std::vector<float> expected =
      reference_attention(in.c, in.q, in.k, in.v, in.mask.empty() ? nullptr : &in.mask, in.effective_scale());
  std::vector<float> portable;
  for (AttentionPath path : available_attention_paths()) {
    const std::string name = attention_path_name(path);
    std::vector<float> alone;
    {
      const ForcedAttention forced(path, false);
      alone = run_sdpa(in, nullptr);
    }
    expect_matches(alone, expected, tolerance, name + ", 1 thread");
    // Every path gives the portable path's bits (the scalar kernel's order of operations).
    if (path == AttentionPath::kPortable) portable = alone;
    EXPECT_TRUE(same_bits(alone, portable)) << name << " differs from the portable path";
    for (size_t threads : {2, 3}) {
      const auto pool = ThreadPool::create(threads);
      ASSERT_TRUE(pool);
      for (bool fine : {false, true}) {
        const ForcedAttention forced(path, fine);
        EXPECT_TRUE(same_bits(run_sdpa(in, pool->get()), alone))
            << name << ", " << threads << " threads" << (fine ? ", finest split" : "");
      }
    }
  }
}

struct TiledCase {
  AttentionCase c;
  bool masked;
  double scale;  // 0: default
};

// Names the case in test output (instead of its bytes).
void PrintTo(const TiledCase& t, std::ostream* os) {
  const AttentionCase& c = t.c;
  *os << "batch " << c.batch << ", sequence " << c.sequence << ", heads " << c.heads << "/" << c.kv_heads
      << ", head_dim " << c.head_dim << ", capacity " << c.capacity << ", start_pos " << c.start_pos
      << (c.causal ? ", causal" : "") << (t.masked ? ", masked" : "") << (t.scale != 0 ? ", explicit scale" : "");
}

class TiledSdpa : public ::testing::TestWithParam<TiledCase> {};

TEST_P(TiledSdpa, MatchesReferenceOnEveryPathAndThreadCount) {
  const TiledCase t = GetParam();
  SdpaInputs in = random_inputs(t.c, t.masked, 41);
  in.scale = t.scale;
  check_every_path_and_thread_count(in, 2e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TiledSdpa,
    ::testing::Values(
        // batch, sequence, heads, kv_heads, head_dim, capacity, start_pos, causal
        TiledCase{{1, 128, 12, 12, 64, 128, 0, true}, false, 0},     // stories110m prefill of 128 tokens
        TiledCase{{1, 1, 12, 12, 64, 2048, 2047, true}, false, 0},   // decode at the end of a 2048 context
        TiledCase{{1, 33, 4, 2, 64, 2048, 1990, true}, false, 0},    // chunked prefill late in a long context, GQA
        TiledCase{{1, 7, 6, 2, 5, 16, 3, true}, false, 0},           // head_dim 5: all of it in the partial vector
        TiledCase{{2, 19, 4, 1, 17, 64, 30, true}, false, 0.3},      // head_dim 17, more rows than a block, batch 2
        TiledCase{{1, 9, 2, 2, 8, 16, 4, false}, false, 0},          // non-causal, no mask
        TiledCase{{1, 20, 4, 2, 17, 40, 5, false}, true, 0},         // mask over the whole cache, GQA
        TiledCase{{1, 3, 2, 1, 64, 2048, 100, false}, true, 0.125},  // mask over a 2048 cache, explicit scale
        TiledCase{{1, 1, 4, 2, 20, 64, 37, false}, true, 0},         // a lone row, head_dim 20, mask, GQA
        TiledCase{{1, 17, 2, 2, 12, 64, 5, true}, false, 0},         // a last block of one row, head_dim 12
        TiledCase{{1, 1, 3, 1, 3, 1, 0, true}, false, 0}));          // one key, head_dim 3

// PyTorch's rules for NaN and infinities, on every path and thread count: a
// The softmax's exponential against e^y in double, over its whole range and
// at the edges: within 2 ulp down to -87, 0 below and at -inf, NaN for NaN.
TEST(TiledSdpa, SoftmaxExpWithinTwoUlp) {
  auto ulps = [](float a, float b) {
    int32_t ia, ib;
    std::memcpy(&ia, &a, sizeof ia);
    std::memcpy(&ib, &b, sizeof ib);
    return std::abs(static_cast<int64_t>(ia) - ib);
  };
  int64_t worst = 0;
  for (int i = 0; i <= 400000; ++i) {
    const float y = -87.0f * static_cast<float>(i) / 400000.0f;
    const float want = static_cast<float>(std::exp(static_cast<double>(y)));
    worst = std::max(worst, ulps(etna::kernels::softmax_exp(y), want));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(etna::kernels::softmax_exp(0.0f), 1.0f);
  EXPECT_EQ(etna::kernels::softmax_exp(-0.0f), 1.0f);
  EXPECT_EQ(etna::kernels::softmax_exp(-87.5f), 0.0f);
  EXPECT_EQ(etna::kernels::softmax_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(etna::kernels::softmax_exp(std::numeric_limits<float>::quiet_NaN())));
}

// NaN in a query row makes that row NaN; a NaN key makes every row that sees
// it NaN (causal rows before it never read it); an infinity in a value gives
// that infinity in the rows that weigh it; a row masked to -inf throughout,
// or with a +inf or NaN in its mask, is NaN (exp(inf - inf) in the softmax);
// a value of +inf under a -inf mask gives 0 * inf: NaN in that dim.
TEST(TiledSdpa, NanAndInfinitiesPropagateAsInPyTorch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const AttentionCase causal{1, 6, 2, 1, 17, 12, 3, true};
  SdpaInputs in = random_inputs(causal, false, 53);
  auto q_at = [&](int64_t r, int64_t h, int64_t d) -> float& {
    return in.q[static_cast<size_t>((r * causal.heads + h) * causal.head_dim + d)];
  };
  auto kv_at = [&](std::vector<float>& t, int64_t pos, int64_t d) -> float& {
    return t[static_cast<size_t>(pos * causal.head_dim + d)];
  };
  q_at(2, 1, 4) = nan;
  kv_at(in.k, 5, 0) = nan;   // seen from row 2 on (start_pos 3 + row + 1 > 5)
  kv_at(in.k, 11, 3) = nan;  // past every row's position: never read
  kv_at(in.v, 1, 7) = inf;   // seen by every row
  check_every_path_and_thread_count(in, 2e-5f);
  const std::vector<float> out = run_sdpa(in, nullptr);
  auto out_at = [&](int64_t r, int64_t h, int64_t d) {
    return out[static_cast<size_t>((r * causal.heads + h) * causal.head_dim + d)];
  };
  EXPECT_TRUE(std::isfinite(out_at(0, 0, 0)) && std::isfinite(out_at(1, 1, 16)));
  EXPECT_EQ(out_at(0, 0, 7), inf);
  EXPECT_TRUE(std::isnan(out_at(2, 0, 0)) && std::isnan(out_at(5, 1, 16)));

  const AttentionCase plain{1, 5, 2, 2, 8, 6, 1, false};
  SdpaInputs masked = random_inputs(plain, true, 59);
  auto mask_at = [&](int64_t r, int64_t j) -> float& {
    return masked.mask[static_cast<size_t>(r * plain.capacity + j)];
  };
  for (int64_t j = 0; j < plain.capacity; ++j) mask_at(0, j) = -inf;
  for (int64_t j = 0; j < plain.capacity; ++j) mask_at(3, j) = 0.0f;
  for (int64_t j = 0; j < plain.capacity; ++j) mask_at(4, j) = 0.5f;
  mask_at(1, 2) = nan;
  mask_at(2, 4) = inf;
  mask_at(3, 5) = -inf;
  masked.v[static_cast<size_t>((5 * plain.kv_heads + 0) * plain.head_dim + 6)] = inf;  // position 5, head 0, dim 6
  check_every_path_and_thread_count(masked, 2e-5f);
  const std::vector<float> mout = run_sdpa(masked, nullptr);
  auto mout_at = [&](int64_t r, int64_t h, int64_t d) {
    return mout[static_cast<size_t>((r * plain.heads + h) * plain.head_dim + d)];
  };
  for (int64_t r : {0, 1, 2}) EXPECT_TRUE(std::isnan(mout_at(r, 1, 3))) << "row " << r;
  EXPECT_TRUE(std::isnan(mout_at(3, 0, 6)));     // 0 * inf
  EXPECT_TRUE(std::isfinite(mout_at(3, 0, 5)));  // other dims of that row
  EXPECT_TRUE(std::isfinite(mout_at(3, 1, 6)));  // head 1 reads another value head
  EXPECT_EQ(mout_at(4, 0, 6), inf);
}

TEST(UpdateCache, WritesRowsAtStartPosOnly) {
  TensorStore store;
  // value [2, 2, 1, 3] into cache [2, 5, 1, 3] at position 2.
  std::vector<float> value_values(12);
  for (size_t i = 0; i < value_values.size(); ++i) value_values[i] = static_cast<float>(i + 1);
  Tensor& value = store.make<float>({2, 2, 1, 3}, value_values);
  Tensor& cache = store.make<float>({2, 5, 1, 3}, std::vector<float>(30, -1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1});
  Args args;
  args.tensor(value).tensor(cache).integer(2).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("llama::update_cache.out", args)));
  const auto c = values_of<float>(cache);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t s = 0; s < 5; ++s) {
      for (int64_t d = 0; d < 3; ++d) {
        const float got = c[static_cast<size_t>((b * 5 + s) * 3 + d)];
        const float want = (s == 2 || s == 3) ? value_values[static_cast<size_t>((b * 2 + (s - 2)) * 3 + d)] : -1.0f;
        EXPECT_EQ(got, want) << "b " << b << " s " << s << " d " << d;
      }
    }
  }
}

TEST(UpdateCache, RefusesWindowPastCapacityWithoutWriting) {
  TensorStore store;
  Tensor& value = store.make<float>({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor& cache = store.make<float>({1, 4, 1, 2}, std::vector<float>(8, 0.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1});
  Args args;
  args.tensor(value).tensor(cache).integer(3).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("llama::update_cache.out", args), {"start_pos 3", "exceeds cache"}));
  EXPECT_EQ(values_of<float>(cache), std::vector<float>(8, 0.0f));
  Args negative;
  negative.tensor(value).tensor(cache).integer(-1).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("llama::update_cache.out", negative), {"start_pos -1"}));
}

TEST(UpdateCacheWithIndices, ScattersRowsAndChecksEveryIndexFirst) {
  TensorStore store;
  Tensor& value = store.make<float>({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Tensor& cache = store.make<float>({1, 5, 1, 2}, std::vector<float>(10, 0.0f));
  Tensor& indices = store.make<int64_t>({1, 3}, {4, 0, 2});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1});
  Args args;
  args.tensor(value).tensor(cache).integer(0).tensor(indices).tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("llama::update_cache_with_indices.out", args)));
  EXPECT_EQ(values_of<float>(cache), (std::vector<float>{3, 4, 0, 0, 5, 6, 0, 0, 1, 2}));

  Tensor& bad = store.make<int64_t>({1, 3}, {1, 5, 3});
  Tensor& untouched = store.make<float>({1, 5, 1, 2}, std::vector<float>(10, 7.0f));
  Args refused;
  refused.tensor(value).tensor(untouched).integer(0).tensor(bad).tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("llama::update_cache_with_indices.out", refused), {"position 5"}));
  EXPECT_EQ(values_of<float>(untouched), std::vector<float>(10, 7.0f));
}

TEST(SdpaWithKvCache, EqualsUpdateThenAttend) {
  const AttentionCase c{1, 2, 4, 2, 4, 6, 3, true};
  KvCacheCall call(c, Lcg(11));
  ASSERT_TRUE(is_ok(call.run(nullptr)));
  // The new rows land at positions 3 and 4 of both caches.
  const auto k_cache_values = call.updated(call.k_cache_values, call.k_new);
  const auto v_cache_values = call.updated(call.v_cache_values, call.v_new);
  EXPECT_EQ(values_of<float>(call.k_cache), k_cache_values);
  EXPECT_EQ(values_of<float>(call.v_cache), v_cache_values);
  expect_near_all(values_of<float>(call.out),
                  reference_attention(c, call.q_values, k_cache_values, v_cache_values, nullptr, 0.5), 2e-5f);
}

}  // namespace
}  // namespace etna::kernel_test
