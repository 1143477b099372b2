// llama:: operators: attention over a KV cache checked against a direct
// double-precision formulation (explicit mask matrix, softmax, weighted sum),
// and cache updates that leave everything else (and, on error, everything)
// untouched.

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

struct AttentionCase {
  int64_t batch, sequence, heads, kv_heads, head_dim, capacity, start_pos;
  bool causal;
};

// out[b, r, h, :] computed in double. Without a mask the keys are positions
// 0 .. start_pos + sequence; with one, every cache position, and mask[r, j]
// is (*mask)[r * capacity + j].
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
        std::vector<double> logits(static_cast<size_t>(visible));
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) dot += double(q_at(b, r, h, d)) * kv_at(k, b, j, kvh, d);
          const bool allowed = !c.causal || j <= c.start_pos + r;
          const double bias = mask ? (*mask)[static_cast<size_t>(r * visible + j)] : 0.0;
          logits[static_cast<size_t>(j)] = allowed ? dot * scale + bias : -std::numeric_limits<double>::infinity();
        }
        double top = -std::numeric_limits<double>::infinity();
        for (double x : logits) top = std::max(top, x);
        double total = 0;
        for (double& x : logits) total += (x = std::exp(x - top));
        for (int64_t d = 0; d < c.head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j) acc += logits[static_cast<size_t>(j)] / total * kv_at(v, b, j, kvh, d);
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
  Args args;
  args.tensor(q).tensor(k).tensor(v).integer(c.start_pos).none().real(0.0).boolean(c.causal).none().tensor(out).same_as(8);
  ASSERT_TRUE(is_ok(run_kernel("llama::custom_sdpa.out", args)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  expect_near_all(values_of<float>(out), reference_attention(c, q_values, k_values, v_values, nullptr, scale), 2e-5f);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CustomSdpa,
    ::testing::Values(AttentionCase{1, 1, 2, 2, 8, 16, 0, true},     // first decode step
                      AttentionCase{1, 1, 4, 2, 8, 16, 9, true},     // decode with grouped heads
                      AttentionCase{1, 5, 4, 1, 16, 16, 3, true},    // chunked prefill after 3 tokens, one kv head
                      AttentionCase{2, 4, 2, 2, 4, 8, 4, true},      // batch 2, fills the cache exactly
                      AttentionCase{1, 3, 2, 2, 8, 10, 2, false},    // non-causal: every visible key
                      AttentionCase{1, 6, 6, 3, 8, 12, 0, true}));   // prefill from position 0

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
  Args args;
  args.tensor(q).tensor(k).tensor(v).integer(1).tensor(mask).real(0.0).boolean(false).real(0.25).tensor(out).same_as(8);
  ASSERT_TRUE(is_ok(run_kernel("llama::custom_sdpa.out", args)));
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
      0.0f,  -0.5f, 0.25f, -inf, 1.0f,  0.0f,  -2.0f, 0.75f,  // row 0 sees keys past position 2
      -inf,  0.0f,  0.0f,  0.5f, -inf,  -1.0f, 0.0f,  -inf,   //
      1.5f,  -inf,  0.0f,  0.0f, 0.25f, -inf,  -inf,  0.0f,   //
  };
  Tensor& q = store.make<float>({1, 3, 4, 8}, q_values);
  Tensor& k = store.make<float>({1, 8, 2, 8}, k_values);
  Tensor& v = store.make<float>({1, 8, 2, 8}, v_values);
  Tensor& mask = store.make<float>({3, 8}, mask_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 3, 4, 8});
  Args args;
  args.tensor(q).tensor(k).tensor(v).integer(c.start_pos).tensor(mask).real(0.0).boolean(false).none().tensor(out)
      .same_as(8);
  ASSERT_TRUE(is_ok(run_kernel("llama::custom_sdpa.out", args)));
  const double scale = 1.0 / std::sqrt(8.0);
  expect_near_all(values_of<float>(out), reference_attention(c, q_values, k_values, v_values, &mask_values, scale),
                  2e-5f);

  // A mask as wide as start_pos + sequence only (the rule before ExecuTorch 0.7) is refused.
  Tensor& narrow = store.make<float>({3, 5}, std::vector<float>(15, 0.0f));
  Args old_rule;
  old_rule.tensor(q).tensor(k).tensor(v).integer(c.start_pos).tensor(narrow).real(0.0).boolean(false).none()
      .tensor(out).same_as(8);
  EXPECT_TRUE(fails_with(run_kernel("llama::custom_sdpa.out", old_rule), {"attn_mask", "must be [3, 8]"}));
}

TEST(SdpaWithKvCache, MaskCoversTheWholeCache) {
  const AttentionCase c{1, 2, 2, 2, 4, 6, 1, false};
  Lcg rng(29);
  TensorStore store;
  const auto q_values = rng.floats(16);
  const auto k_new = rng.floats(16);
  const auto v_new = rng.floats(16);
  auto k_cache_values = rng.floats(48);
  auto v_cache_values = rng.floats(48);
  const std::vector<float> mask_values = {0.0f, 0.5f, -1.0f, 0.0f, 0.25f, -0.75f,
                                          -0.25f, 0.0f, 0.0f, 1.0f, 0.0f, 0.5f};
  Tensor& q = store.make<float>({1, 2, 2, 4}, q_values);
  Tensor& k = store.make<float>({1, 2, 2, 4}, k_new);
  Tensor& v = store.make<float>({1, 2, 2, 4}, v_new);
  Tensor& k_cache = store.make<float>({1, 6, 2, 4}, k_cache_values);
  Tensor& v_cache = store.make<float>({1, 6, 2, 4}, v_cache_values);
  Tensor& mask = store.make<float>({2, 6}, mask_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  Args args;
  args.tensor(q).tensor(k).tensor(v).tensor(k_cache).tensor(v_cache).integer(1).integer(2).tensor(mask).real(0.0)
      .boolean(false).none().tensor(out).same_as(11);
  ASSERT_TRUE(is_ok(run_kernel("llama::sdpa_with_kv_cache.out", args)));
  std::copy(k_new.begin(), k_new.end(), k_cache_values.begin() + 1 * 8);
  std::copy(v_new.begin(), v_new.end(), v_cache_values.begin() + 1 * 8);
  expect_near_all(values_of<float>(out),
                  reference_attention(c, q_values, k_cache_values, v_cache_values, &mask_values, 0.5), 2e-5f);
}

TEST(CustomSdpa, RefusesBadShapes) {
  TensorStore store;
  Tensor& q = store.make_empty(ScalarType::kFloat, {1, 2, 3, 4});
  Tensor& k = store.make_empty(ScalarType::kFloat, {1, 8, 2, 4});
  Tensor& v = store.make_empty(ScalarType::kFloat, {1, 8, 2, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 3, 4});
  Args groups;
  groups.tensor(q).tensor(k).tensor(v).integer(0).none().real(0.0).boolean(true).none().tensor(out).same_as(8);
  EXPECT_TRUE(fails_with(run_kernel("llama::custom_sdpa.out", groups), {"multiple of key/value heads"}));

  Tensor& q2 = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  Tensor& out2 = store.make_empty(ScalarType::kFloat, {1, 2, 2, 4});
  Args window;
  window.tensor(q2).tensor(k).tensor(v).integer(7).none().real(0.0).boolean(true).none().tensor(out2).same_as(8);
  EXPECT_TRUE(fails_with(run_kernel("llama::custom_sdpa.out", window), {"start_pos 7", "exceeds key"}));

  Tensor& mask = store.make_empty(ScalarType::kFloat, {2, 2});
  Args both;
  both.tensor(q2).tensor(k).tensor(v).integer(0).tensor(mask).real(0.0).boolean(true).none().tensor(out2).same_as(8);
  EXPECT_TRUE(fails_with(run_kernel("llama::custom_sdpa.out", both), {"cannot both be set"}));
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
  Lcg rng(11);
  TensorStore store;
  const auto q_values = rng.floats(32);
  const auto k_new = rng.floats(16);
  const auto v_new = rng.floats(16);
  auto k_cache_values = rng.floats(48);
  auto v_cache_values = rng.floats(48);
  Tensor& q = store.make<float>({1, 2, 4, 4}, q_values);
  Tensor& k = store.make<float>({1, 2, 2, 4}, k_new);
  Tensor& v = store.make<float>({1, 2, 2, 4}, v_new);
  Tensor& k_cache = store.make<float>({1, 6, 2, 4}, k_cache_values);
  Tensor& v_cache = store.make<float>({1, 6, 2, 4}, v_cache_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 4, 4});
  Args args;
  args.tensor(q).tensor(k).tensor(v).tensor(k_cache).tensor(v_cache).integer(3).integer(2).none().real(0.0)
      .boolean(true).none().tensor(out).same_as(11);
  ASSERT_TRUE(is_ok(run_kernel("llama::sdpa_with_kv_cache.out", args)));
  // The new rows land at positions 3 and 4 of both caches.
  std::copy(k_new.begin(), k_new.end(), k_cache_values.begin() + 3 * 8);
  std::copy(v_new.begin(), v_new.end(), v_cache_values.begin() + 3 * 8);
  EXPECT_EQ(values_of<float>(k_cache), k_cache_values);
  EXPECT_EQ(values_of<float>(v_cache), v_cache_values);
  expect_near_all(values_of<float>(out),
                  reference_attention(c, q_values, k_cache_values, v_cache_values, nullptr, 0.5), 2e-5f);
}

}  // namespace
}  // namespace etna::kernel_test
