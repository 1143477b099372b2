#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelReduction, SumOverEachDimMatchesLoops) {
  Lcg rng(3);
  const std::vector<float> values = rng.floats(2 * 3 * 4);
  auto at = [&](int64_t i, int64_t j, int64_t k) { return values[static_cast<size_t>((i * 3 + j) * 4 + k)]; };
  for (int64_t dim = 0; dim < 3; ++dim) {
    TensorStore store;
    Tensor& self = store.make<float>({2, 3, 4}, values);
    std::vector<int64_t> out_shape = {2, 3, 4};
    out_shape[static_cast<size_t>(dim)] = 1;
    Tensor& out = store.make_empty(ScalarType::kFloat, out_shape);
    Args args;
    args.tensor(self).ints({dim - 3}).boolean(true).none().tensor(out).same_as(4);  // negative dim
    ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", args)));
    const auto got = values_of<float>(out);
    size_t n = 0;
    for (int64_t i = 0; i < out_shape[0]; ++i) {
      for (int64_t j = 0; j < out_shape[1]; ++j) {
        for (int64_t k = 0; k < out_shape[2]; ++k) {
          double expected = 0;
          for (int64_t r = 0; r < (dim == 0 ? 2 : dim == 1 ? 3 : 4); ++r) {
            expected += at(dim == 0 ? r : i, dim == 1 ? r : j, dim == 2 ? r : k);
          }
          EXPECT_NEAR(got[n++], expected, 1e-5) << "dim " << dim;
        }
      }
    }
  }
}

TEST(KernelReduction, SumWithoutKeepdimAndOverAllDims) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& rows = store.make_empty(ScalarType::kLong, {2});
  Args by_row;
  by_row.tensor(self).ints({1}).boolean(false).none().tensor(rows).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", by_row)));
  EXPECT_EQ(values_of<int64_t>(rows), (std::vector<int64_t>{6, 15}));

  Tensor& total = store.make_empty(ScalarType::kLong, {});
  Args all;
  all.tensor(self).none().boolean(false).none().tensor(total).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", all)));
  EXPECT_EQ(values_of<int64_t>(total), (std::vector<int64_t>{21}));

  // An explicit dtype converts the input first; it must match out.
  Tensor& as_float = store.make_empty(ScalarType::kFloat, {});
  Args with_dtype;
  with_dtype.tensor(self).ints({}).boolean(false).integer(static_cast<int64_t>(ScalarType::kFloat)).tensor(as_float).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", with_dtype)));
  EXPECT_EQ(values_of<float>(as_float), (std::vector<float>{21}));
  Args mismatch;
  mismatch.tensor(self).ints({}).boolean(false).integer(static_cast<int64_t>(ScalarType::kDouble)).tensor(as_float).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::sum.IntList_out", mismatch), {"dtype", "float64", "float32"}));
}

TEST(KernelReduction, SumRejectsBadDims) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kFloat, {});
  Args duplicate;
  duplicate.tensor(self).ints({1, -1}).boolean(false).none().tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::sum.IntList_out", duplicate), {"aten::sum.IntList_out", "more than once"}));
  Args range;
  range.tensor(self).ints({2}).boolean(false).none().tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::sum.IntList_out", range), {"dim", "2", "out of range"}));
}

TEST(KernelReduction, MeanLikeTheConstantBufferModel) {
  // mean(x, dim=[1]) for x float32[1, 2] -> float32[1]
  TensorStore store;
  Tensor& self = store.make<float>({1, 2}, {3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1});
  Args args;
  args.tensor(self).ints({1}).boolean(false).none().tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::mean.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{3.5f}));

  Tensor& all = store.make_empty(ScalarType::kFloat, {});
  Args dtype_form;
  dtype_form.tensor(self).none().tensor(all).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::mean.dtype_out", dtype_form)));
  EXPECT_EQ(values_of<float>(all), (std::vector<float>{3.5f}));

  Tensor& ints = store.make<int64_t>({2}, {1, 2});
  Args int_mean;
  int_mean.tensor(ints).none().boolean(false).none().tensor(all).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::mean.out", int_mean), {"aten::mean.out", "int64"}));
  Args int_mean_with_dtype;
  int_mean_with_dtype.tensor(ints).none().boolean(false).integer(static_cast<int64_t>(ScalarType::kFloat)).tensor(all).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::mean.out", int_mean_with_dtype)));
  EXPECT_EQ(values_of<float>(all), (std::vector<float>{1.5f}));
}

TEST(KernelReduction, AmaxPropagatesNaNAndRejectsEmpty) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& self = store.make<float>({2, 3}, {1, 5, 2, 4, nan, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  Args args;
  args.tensor(self).ints({1}).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::amax.out", args)));
  const auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 5.0f);
  EXPECT_TRUE(std::isnan(got[1]));

  Tensor& cols = store.make_empty(ScalarType::kFloat, {3});
  Args amin;
  amin.tensor(self).ints({0}).boolean(false).tensor(cols).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::amin.out", amin)));
  const auto mins = values_of<float>(cols);
  EXPECT_EQ(mins[0], 1.0f);
  EXPECT_TRUE(std::isnan(mins[1]));
  EXPECT_EQ(mins[2], 2.0f);

  Tensor& empty = store.make_empty(ScalarType::kFloat, {2, 0});
  Tensor& empty_out = store.make_empty(ScalarType::kFloat, {2});
  Args over_empty;
  over_empty.tensor(empty).ints({1}).boolean(false).tensor(empty_out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::amax.out", over_empty), {"aten::amax.out", "empty"}));
}

TEST(KernelReduction, ArgmaxFirstOfTiesAndFlattened) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, {1, 7, 7, 9, 2, 9});
  Tensor& out = store.make_empty(ScalarType::kLong, {2});
  Args by_row;
  by_row.tensor(self).integer(1).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::argmax.out", by_row)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{1, 0}));

  Tensor& flat = store.make_empty(ScalarType::kLong, {});
  Args flattened;
  flattened.tensor(self).none().boolean(false).tensor(flat).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::argmax.out", flattened)));
  EXPECT_EQ(values_of<int64_t>(flat), (std::vector<int64_t>{3}));

  Tensor& kept = store.make_empty(ScalarType::kLong, {1, 3});
  Args argmin;
  argmin.tensor(self).integer(0).boolean(true).tensor(kept).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::argmin.out", argmin)));
  EXPECT_EQ(values_of<int64_t>(kept), (std::vector<int64_t>{0, 1, 0}));

  Tensor& float_out = store.make_empty(ScalarType::kFloat, {2});
  Args wrong_dtype;
  wrong_dtype.tensor(self).integer(1).boolean(false).tensor(float_out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::argmax.out", wrong_dtype), {"out", "int64"}));
}

TEST(KernelReduction, CumsumAlongEachDim) {
  TensorStore store;
  Tensor& self = store.make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kLong, {2, 3});
  Args rows;
  rows.tensor(self).integer(1).none().tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::cumsum.out", rows)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  Args cols;
  cols.tensor(self).integer(0).none().tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::cumsum.out", cols)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));

  Tensor& floats = store.make<float>({4}, {0.5f, 0.25f, 1, -2});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {4});
  Args f;
  f.tensor(floats).integer(-1).integer(static_cast<int64_t>(ScalarType::kFloat)).tensor(float_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::cumsum.out", f)));
  EXPECT_EQ(values_of<float>(float_out), (std::vector<float>{0.5f, 0.75f, 1.75f, -0.25f}));
}

}  // namespace
}  // namespace etna::kernel_test
