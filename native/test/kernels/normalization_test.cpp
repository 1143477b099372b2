#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

// Softmax of `values` viewed as [outer, size, inner] along the middle dim.
std::vector<double> reference_softmax(const std::vector<float>& values, int64_t outer, int64_t size, int64_t inner,
                                      bool log) {
  std::vector<double> result(values.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double total = 0;
      for (int64_t k = 0; k < size; ++k) total += std::exp(static_cast<double>(values[(o * size + k) * inner + i]));
      for (int64_t k = 0; k < size; ++k) {
        const size_t at = static_cast<size_t>((o * size + k) * inner + i);
        result[at] = log ? values[at] - std::log(total) : std::exp(static_cast<double>(values[at])) / total;
      }
    }
  }
  return result;
}

TEST(KernelNormalization, SoftmaxAndLogSoftmaxOverEachDim) {
  Lcg rng(5);
  const auto values = rng.floats(3 * 4 * 5, -4, 4);
  const std::vector<int64_t> sizes = {3, 4, 5};
  for (bool log : {false, true}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      TensorStore store;
      Tensor& self = store.make<float>(sizes, values);
      Tensor& out = store.make_empty(ScalarType::kFloat, sizes);
      Args args;
      args.tensor(self).integer(dim).boolean(false).tensor(out).same_as(3);
      const char* key = log ? "aten::_log_softmax.out" : "aten::_softmax.out";
      ASSERT_TRUE(is_ok(run_kernel(key, args)));
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
      for (int64_t d = dim + 1; d < 3; ++d) inner *= sizes[d];
      const auto expected = reference_softmax(values, outer, sizes[dim], inner, log);
      const auto got = values_of<float>(out);
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << key << " dim " << dim;
    }
  }
}

TEST(KernelNormalization, SoftmaxIsStableForLargeInputsLikeTheSoftmaxModel) {
  // et_softmax_pr17248.pte runs _softmax over float32[2, 4096]; large values
  // must not overflow.
  TensorStore store;
  std::vector<float> values(2 * 4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 4096) * 0.5f + 500.0f;
  Tensor& self = store.make<float>({2, 4096}, values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 4096});
  Args args;
  args.tensor(self).integer(-1).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::_softmax.out", args)));
  const auto got = values_of<float>(out);
  double row_sum = 0;
  for (size_t i = 0; i < 4096; ++i) {
    ASSERT_TRUE(std::isfinite(got[i]));
    row_sum += got[i];
  }
  EXPECT_NEAR(row_sum, 1.0, 1e-4);
  // The largest element gets exp(0) / sum_k exp(-0.5 k) = 1 - exp(-0.5) (geometric series).
  const double expected_top = 1.0 - std::exp(-0.5);
  EXPECT_NEAR(got[4095], expected_top, 1e-4);
  EXPECT_EQ(got[4095], got[4096 + 4095]);
}

TEST(KernelNormalization, SoftmaxRejectsIntsAndHalfToFloat) {
  TensorStore store;
  Tensor& ints = store.make<int64_t>({2}, {1, 2});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  Args int_args;
  int_args.tensor(ints).integer(0).boolean(false).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::_softmax.out", int_args), {"aten::_softmax.out", "self", "int64"}));
  Tensor& floats = store.make<float>({2}, {1, 2});
  Args half;
  half.tensor(floats).integer(0).boolean(true).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::_softmax.out", half), {"half_to_float"}));
  Args range;
  range.tensor(floats).integer(1).boolean(false).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::_softmax.out", range), {"dim", "out of range"}));
}

TEST(KernelNormalization, LayerNormWithWeightAndBias) {
  TensorStore store;
  const std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 6};
  Tensor& input = store.make<float>({2, 4}, x);
  Tensor& weight = store.make<float>({4}, {1, 2, 0.5f, -1});
  Tensor& bias = store.make<float>({4}, {0, 1, 0, 0.5f});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 4});
  Tensor& mean = store.make_empty(ScalarType::kFloat, {2, 1});
  Tensor& rstd = store.make_empty(ScalarType::kFloat, {2, 1});
  Args args;
  args.tensor(input).ints({4}).tensor(weight).tensor(bias).real(1e-5).outs({&out, &mean, &rstd});
  ASSERT_TRUE(is_ok(run_kernel("aten::native_layer_norm.out", args)));
  const auto got = values_of<float>(out);
  const std::vector<float> w = {1, 2, 0.5f, -1}, b = {0, 1, 0, 0.5f};
  for (int row = 0; row < 2; ++row) {
    const auto [m, r] = row_statistics(x, static_cast<size_t>(row), 4, 1e-5);
    EXPECT_NEAR(values_of<float>(mean)[row], m, 1e-6);
    EXPECT_NEAR(values_of<float>(rstd)[row], r, 1e-5);
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(got[row * 4 + j], (x[row * 4 + j] - m) * r * w[j] + b[j], 1e-5) << row << "," << j;
    }
  }
}

TEST(KernelNormalization, LayerNormWithoutAffineAndBadShapes) {
  TensorStore store;
  Tensor& input = store.make<float>({1, 2, 2}, {1, 3, 5, 7});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 2});
  Tensor& mean = store.make_empty(ScalarType::kFloat, {1, 1, 1});
  Tensor& rstd = store.make_empty(ScalarType::kFloat, {1, 1, 1});
  Args args;
  args.tensor(input).ints({2, 2}).none().none().real(0.0).outs({&out, &mean, &rstd});
  ASSERT_TRUE(is_ok(run_kernel("aten::native_layer_norm.out", args)));
  EXPECT_EQ(values_of<float>(mean), (std::vector<float>{4}));
  const float r = static_cast<float>(1 / std::sqrt(5.0));  // variance of 1,3,5,7 is 5
  const auto got = values_of<float>(out);
  EXPECT_NEAR(got[0], -3 * r, 1e-6);
  EXPECT_NEAR(got[3], 3 * r, 1e-6);

  Args mismatch;
  mismatch.tensor(input).ints({3}).none().none().real(1e-5).outs({&out, &mean, &rstd});
  EXPECT_TRUE(fails_with(run_kernel("aten::native_layer_norm.out", mismatch), {"normalized_shape", "[3]"}));

  Tensor& short_weight = store.make<float>({3}, {1, 1, 1});
  Args bad_weight;
  bad_weight.tensor(input).ints({2}).tensor(short_weight).none().real(1e-5).outs({&out, &mean, &rstd});
  EXPECT_TRUE(fails_with(run_kernel("aten::native_layer_norm.out", bad_weight), {"weight", "[2]"}));
}

TEST(KernelNormalization, GroupNormNormalizesEachGroupAndAppliesPerChannelAffine) {
  TensorStore store;
  Lcg rng(21);
  // N = 2, C = 4 in 2 groups, HxW = 3 (spatial [3]).
  const auto values = rng.floats(2 * 4 * 3);
  Tensor& input = store.make<float>({2, 4, 3}, values);
  const std::vector<float> w = {1, 2, -1, 0.5f}, b = {0, 0.5f, 1, -1};
  Tensor& weight = store.make<float>({4}, w);
  Tensor& bias = store.make<float>({4}, b);
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 4, 3});
  Tensor& mean = store.make_empty(ScalarType::kFloat, {2, 2});
  Tensor& rstd = store.make_empty(ScalarType::kFloat, {2, 2});
  const double eps = 1e-5;
  for (bool affine : {true, false}) {
    Args args;
    args.tensor(input).optional_tensor(affine ? &weight : nullptr).optional_tensor(affine ? &bias : nullptr);
    args.integer(2).integer(4).integer(3).integer(2).real(eps);
    args.outs({&out, &mean, &rstd});
    ASSERT_TRUE(is_ok(run_kernel("aten::native_group_norm.out", args)));
    const auto got = values_of<float>(out);
    for (size_t row = 0; row < 4; ++row) {  // (n, g): 6 consecutive values
      const auto [m, r] = row_statistics(values, row, 6, eps);
      EXPECT_NEAR(values_of<float>(mean)[row], m, 1e-6);
      EXPECT_NEAR(values_of<float>(rstd)[row], r, 1e-4);
      for (size_t j = 0; j < 6; ++j) {
        const size_t channel = (row % 2) * 2 + j / 3;
        double expected = (values[row * 6 + j] - m) * r;
        if (affine) expected = expected * w[channel] + b[channel];
        EXPECT_NEAR(got[row * 6 + j], expected, 1e-5) << row << " " << j;
      }
    }
  }
}

TEST(KernelNormalization, GroupNormChecksSizesAndGroups) {
  TensorStore store;
  Tensor& input = store.make<float>({1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 4, 2});
  Tensor& mean = store.make_empty(ScalarType::kFloat, {1, 2});
  Tensor& rstd = store.make_empty(ScalarType::kFloat, {1, 2});
  const std::string key = "aten::native_group_norm.out";
  auto call = [&](int64_t n, int64_t c, int64_t hxw, int64_t group) {
    Args args;
    args.tensor(input).none().none().integer(n).integer(c).integer(hxw).integer(group).real(1e-5);
    args.outs({&out, &mean, &rstd});
    return run_kernel(key, args);
  };
  EXPECT_TRUE(fails_with(call(1, 4, 3, 2), {key, "HxW = 3"}));
  EXPECT_TRUE(fails_with(call(2, 4, 2, 2), {key, "N = 2"}));
  EXPECT_TRUE(fails_with(call(1, 4, 2, 3), {key, "group 3"}));
  EXPECT_TRUE(fails_with(call(1, 4, 2, 0), {key, "group 0"}));
  ASSERT_TRUE(is_ok(call(1, 4, 2, 2)));
  // Each group holds 4 values: {1..4} and {5..8}, mean 2.5 and 6.5.
  EXPECT_EQ(values_of<float>(mean), (std::vector<float>{2.5f, 6.5f}));
}

}  // namespace
}  // namespace etna::kernel_test
