#include <cmath>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

// Textbook triple loop, for comparison.
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t n, int64_t m,
                                 int64_t p) {
  std::vector<double> c(static_cast<size_t>(n * p), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < p; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < m; ++k) sum += static_cast<double>(a[i * m + k]) * b[k * p + j];
      c[static_cast<size_t>(i * p + j)] = sum;
    }
  }
  return c;
}

TEST(KernelMatmul, MmMatchesNaiveProduct) {
  Lcg rng(17);
  for (auto [n, m, p] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {3, 5, 2}, {16, 9, 33}, {4, 0, 3}}) {
    TensorStore store;
    const auto a = rng.floats(static_cast<size_t>(n * m));
    const auto b = rng.floats(static_cast<size_t>(m * p));
    Tensor& ta = store.make<float>({n, m}, a);
    Tensor& tb = store.make<float>({m, p}, b);
    Tensor& out = store.make_empty(ScalarType::kFloat, {n, p});
    Args args;
    args.tensor(ta).tensor(tb).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::mm.out", args)));
    const auto expected = naive_matmul(a, b, n, m, p);
    const auto got = values_of<float>(out);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << n << "x" << m << "x" << p;
  }
}

TEST(KernelMatmul, IntegerMm) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({2, 2}, {1, 2, 3, 4});
  Tensor& b = store.make<int64_t>({2, 2}, {5, 6, 7, 8});
  Tensor& out = store.make_empty(ScalarType::kLong, {2, 2});
  Args args;
  args.tensor(a).tensor(b).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::mm.out", args)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(KernelMatmul, BmmMultipliesEachBatch) {
  Lcg rng(23);
  const int64_t batch = 3, n = 2, m = 4, p = 5;
  const auto a = rng.floats(static_cast<size_t>(batch * n * m));
  const auto b = rng.floats(static_cast<size_t>(batch * m * p));
  TensorStore store;
  Tensor& ta = store.make<float>({batch, n, m}, a);
  Tensor& tb = store.make<float>({batch, m, p}, b);
  Tensor& out = store.make_empty(ScalarType::kFloat, {batch, n, p});
  Args args;
  args.tensor(ta).tensor(tb).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::bmm.out", args)));
  const auto got = values_of<float>(out);
  for (int64_t s = 0; s < batch; ++s) {
    const std::vector<float> as(a.begin() + s * n * m, a.begin() + (s + 1) * n * m);
    const std::vector<float> bs(b.begin() + s * m * p, b.begin() + (s + 1) * m * p);
    const auto expected = naive_matmul(as, bs, n, m, p);
    for (int64_t i = 0; i < n * p; ++i) EXPECT_NEAR(got[s * n * p + i], expected[i], 1e-4);
  }
}

TEST(KernelMatmul, AddmmBroadcastsBiasWithBetaAndAlpha) {
  TensorStore store;
  Tensor& bias = store.make<float>({3}, {1, 2, 3});
  Tensor& mat1 = store.make<float>({2, 2}, {1, 0, 0, 1});
  Tensor& mat2 = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  Args args;
  args.tensor(bias).tensor(mat1).tensor(mat2).real(0.5).integer(2).tensor(out).same_as(5);
  ASSERT_TRUE(is_ok(run_kernel("aten::addmm.out", args)));
  // 2 * mat2 + 0.5 * bias
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{2.5f, 5, 7.5f, 8.5f, 11, 13.5f}));

  // beta = 0 ignores the bias even when it is NaN.
  Tensor& nan_bias = store.make<float>({3}, {NAN, NAN, NAN});
  Args ignore;
  ignore.tensor(nan_bias).tensor(mat1).tensor(mat2).integer(0).integer(1).tensor(out).same_as(5);
  ASSERT_TRUE(is_ok(run_kernel("aten::addmm.out", ignore)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(KernelMatmul, LinearWithAndWithoutBias) {
  Lcg rng(29);
  const int64_t batch = 2, tokens = 3, in = 5, features = 4;
  const auto x = rng.floats(static_cast<size_t>(batch * tokens * in));
  const auto w = rng.floats(static_cast<size_t>(features * in));
  const auto b = rng.floats(static_cast<size_t>(features));
  for (bool with_bias : {true, false}) {
    TensorStore store;
    Tensor& input = store.make<float>({batch, tokens, in}, x);
    Tensor& weight = store.make<float>({features, in}, w);
    Tensor& bias = store.make<float>({features}, b);
    Tensor& out = store.make_empty(ScalarType::kFloat, {batch, tokens, features});
    Args args;
    args.tensor(input).tensor(weight).optional_tensor(with_bias ? &bias : nullptr);
    args.tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::linear.out", args)));
    const auto got = values_of<float>(out);
    for (int64_t r = 0; r < batch * tokens; ++r) {
      for (int64_t j = 0; j < features; ++j) {
        double expected = with_bias ? b[j] : 0.0;
        for (int64_t k = 0; k < in; ++k) expected += static_cast<double>(x[r * in + k]) * w[j * in + k];
        EXPECT_NEAR(got[r * features + j], expected, 1e-4);
      }
    }
  }
}

TEST(KernelMatmul, ShapeAndDtypeErrors) {
  TensorStore store;
  Tensor& a = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& b = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  Args inner;
  inner.tensor(a).tensor(b).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::mm.out", inner), {"aten::mm.out", "inner sizes 3 and 2"}));

  Tensor& ints = store.make<int64_t>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Args dtype;
  dtype.tensor(a).tensor(ints).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::mm.out", dtype), {"mat2", "int64", "same dtype"}));

  Tensor& vector = store.make<float>({3}, {1, 2, 3});
  Args rank;
  rank.tensor(a).tensor(vector).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::mm.out", rank), {"mat2", "rank 2"}));

  Tensor& wrong_out = store.make_empty(ScalarType::kFloat, {3, 3});
  Tensor& square = store.make<float>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Args static_out;
  static_out.tensor(a).tensor(square).tensor(wrong_out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::mm.out", static_out), {"aten::mm.out", "out", "[2, 3]"}));

  Tensor& bad_bias = store.make<float>({2}, {1, 2});
  Tensor& product = store.make_empty(ScalarType::kFloat, {2, 3});
  Args addmm;
  addmm.tensor(bad_bias).tensor(a).tensor(square).integer(1).integer(1).tensor(product).same_as(5);
  EXPECT_TRUE(fails_with(run_kernel("aten::addmm.out", addmm), {"aten::addmm.out", "broadcast"}));
}

}  // namespace
}  // namespace etna::kernel_test
