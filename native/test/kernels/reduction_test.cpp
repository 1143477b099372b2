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
  with_dtype.tensor(self).ints({}).boolean(false).dtype(ScalarType::kFloat).tensor(as_float).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", with_dtype)));
  EXPECT_EQ(values_of<float>(as_float), (std::vector<float>{21}));
  Args mismatch;
  mismatch.tensor(self).ints({}).boolean(false).dtype(ScalarType::kDouble).tensor(as_float).same_as(4);
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
  int_mean_with_dtype.tensor(ints).none().boolean(false).dtype(ScalarType::kFloat).tensor(all).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::mean.out", int_mean_with_dtype)));
  EXPECT_EQ(values_of<float>(all), (std::vector<float>{1.5f}));
}

TEST(KernelReduction, AmaxPropagatesNaNAndRejectsEmpty) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& self = store.make<float>({2, 3}, {1, 5, 2, 4, nan, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  ASSERT_TRUE(is_ok(run_reduction("aten::amax.out", self, {1}, false, out)));
  const auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 5.0f);
  EXPECT_TRUE(std::isnan(got[1]));

  Tensor& cols = store.make_empty(ScalarType::kFloat, {3});
  ASSERT_TRUE(is_ok(run_reduction("aten::amin.out", self, {0}, false, cols)));
  const auto mins = values_of<float>(cols);
  EXPECT_EQ(mins[0], 1.0f);
  EXPECT_TRUE(std::isnan(mins[1]));
  EXPECT_EQ(mins[2], 2.0f);

  Tensor& empty = store.make_empty(ScalarType::kFloat, {2, 0});
  Tensor& empty_out = store.make_empty(ScalarType::kFloat, {2});
  EXPECT_TRUE(fails_with(run_reduction("aten::amax.out", empty, {1}, false, empty_out), {"aten::amax.out", "empty"}));
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
  f.tensor(floats).integer(-1).dtype(ScalarType::kFloat).tensor(float_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::cumsum.out", f)));
  EXPECT_EQ(values_of<float>(float_out), (std::vector<float>{0.5f, 0.75f, 1.75f, -0.25f}));
}

// --- any ------------------------------------------------------------------------------

TEST(KernelReduction, AnyOverAllDimsOneDimAndADimList) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [2, 3, 2]: only (0, 1, 1) = NaN and (1, 2, 0) = -0.5 are truthy.
  std::vector<float> values(12, 0.0f);
  values[3] = nan;
  values[10] = -0.5f;
  Tensor& self = store.make<float>({2, 3, 2}, values);
  Tensor& scalar_out = store.make_empty(ScalarType::kBool, {});
  Args all;
  all.tensor(self).tensor(scalar_out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::any.all_out", all)));
  EXPECT_EQ(values_of<bool>(scalar_out), (std::vector<bool>{true}));

  Tensor& by_dim = store.make_empty(ScalarType::kByte, {2, 2});
  Args one;
  one.tensor(self).integer(-2).boolean(false).tensor(by_dim).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::any.out", one)));
  EXPECT_EQ(values_of<uint8_t>(by_dim), (std::vector<uint8_t>{0, 1, 1, 0}));

  Tensor& kept = store.make_empty(ScalarType::kBool, {1, 3, 1});
  ASSERT_TRUE(is_ok(run_reduction("aten::any.dims_out", self, {0, 2}, true, kept)));
  EXPECT_EQ(shape_of(kept), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(values_of<bool>(kept), (std::vector<bool>{false, true, true}));

  // None reduces everything; an empty list maps each element to its truth.
  Tensor& none_out = store.make_empty(ScalarType::kBool, {});
  Args none;
  none.tensor(self).none().boolean(false).tensor(none_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::any.dims_out", none)));
  EXPECT_EQ(values_of<bool>(none_out), (std::vector<bool>{true}));
  Tensor& each = store.make_empty(ScalarType::kBool, {2, 3, 2});
  ASSERT_TRUE(is_ok(run_reduction("aten::any.dims_out", self, {}, false, each)));
  const auto truth = values_of<bool>(each);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(truth[i], i == 3 || i == 10) << i;
}

TEST(KernelReduction, AnyOfAnEmptyReductionIsFalseAndOutMustBeBoolOrUint8) {
  TensorStore store;
  Tensor& empty = store.make<int32_t>({2, 0}, {});
  Tensor& out = store.make_empty(ScalarType::kBool, {2});
  Args args;
  args.tensor(empty).integer(1).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::any.out", args)));
  EXPECT_EQ(values_of<bool>(out), (std::vector<bool>{false, false}));
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {2});
  Args bad_out;
  bad_out.tensor(empty).integer(1).boolean(false).tensor(float_out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::any.out", bad_out), {"aten::any.out", "bool or uint8"}));
  Args bad_dim;
  bad_dim.tensor(empty).integer(2).boolean(false).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::any.out", bad_dim), {"aten::any.out", "dim"}));
  EXPECT_TRUE(fails_with(run_reduction("aten::any.dims_out", empty, {1, -1}, false, out),
                         {"aten::any.dims_out", "more than once"}));
}

// --- max.dim / min.dim / var_mean --------------------------------------------------------

TEST(KernelReduction, MaxAndMinAlongADimGiveValuesAndFirstIndicesWithNaNWinning) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [2, 4]: row 0 has a tie for the max (5 at 1 and 3) and for the min (-1 at 0 and 2);
  // row 1 has a NaN at 2.
  Tensor& self = store.make<float>({2, 4}, {-1, 5, -1, 5, 0, 3, nan, 9});
  Tensor& values = store.make_empty(ScalarType::kFloat, {2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {2});
  Args max_args;
  max_args.tensor(self).integer(-1).boolean(false).outs({&values, &indices});
  ASSERT_TRUE(is_ok(run_kernel("aten::max.dim_max", max_args)));
  auto got = values_of<float>(values);
  EXPECT_EQ(got[0], 5);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{1, 2}));
  Args min_args;
  min_args.tensor(self).integer(1).boolean(false).outs({&values, &indices});
  ASSERT_TRUE(is_ok(run_kernel("aten::min.dim_min", min_args)));
  got = values_of<float>(values);
  EXPECT_EQ(got[0], -1);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{0, 2}));

  // Along dim 0 with keepdim, on integers.
  Tensor& ints = store.make<int32_t>({3, 2}, {4, -7, 9, -7, 9, 1});
  Tensor& int_values = store.make_empty(ScalarType::kInt, {1, 2});
  Tensor& int_indices = store.make_empty(ScalarType::kLong, {1, 2});
  Args keep;
  keep.tensor(ints).integer(0).boolean(true).outs({&int_values, &int_indices});
  ASSERT_TRUE(is_ok(run_kernel("aten::max.dim_max", keep)));
  EXPECT_EQ(values_of<int32_t>(int_values), (std::vector<int32_t>{9, 1}));
  EXPECT_EQ(values_of<int64_t>(int_indices), (std::vector<int64_t>{1, 2}));
}

TEST(KernelReduction, MaxDimRejectsEmptyDimsWrongIndexDtypeAndBadDims) {
  TensorStore store;
  Tensor& empty = store.make<float>({2, 0}, {});
  Tensor& values = store.make_empty(ScalarType::kFloat, {2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {2});
  Args args;
  args.tensor(empty).integer(1).boolean(false).outs({&values, &indices});
  EXPECT_TRUE(fails_with(run_kernel("aten::max.dim_max", args), {"aten::max.dim_max", "empty"}));
  Tensor& self = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& int_indices = store.make_empty(ScalarType::kInt, {2});
  Args wrong_index;
  wrong_index.tensor(self).integer(1).boolean(false).outs({&values, &int_indices});
  EXPECT_TRUE(fails_with(run_kernel("aten::min.dim_min", wrong_index), {"aten::min.dim_min", "min_indices", "int64"}));
  Args bad_dim;
  bad_dim.tensor(self).integer(2).boolean(false).outs({&values, &indices});
  EXPECT_TRUE(fails_with(run_kernel("aten::max.dim_max", bad_dim), {"aten::max.dim_max", "dim"}));
}

TEST(KernelReduction, VarMeanUsesTheCorrectionAndGivesNaNWithoutDegreesOfFreedom) {
  TensorStore store;
  // Rows {1, 2, 3, 4} (mean 2.5, squared deviations 5) and {2, 2, 2, 10} (mean 4, 48).
  Tensor& self = store.make<float>({2, 4}, {1, 2, 3, 4, 2, 2, 2, 10});
  Tensor& var = store.make_empty(ScalarType::kFloat, {2});
  Tensor& mean = store.make_empty(ScalarType::kFloat, {2});
  auto run = [&](std::optional<double> correction, std::vector<int64_t> dims, bool keepdim, Tensor& v, Tensor& m) {
    Args args;
    args.tensor(self).ints(dims);
    if (correction) args.real(*correction);
    else args.none();
    args.boolean(keepdim).outs({&v, &m});
    return run_kernel("aten::var_mean.correction_out", args);
  };
  ASSERT_TRUE(is_ok(run(std::nullopt, {1}, false, var, mean)));  // default correction 1
  EXPECT_EQ(values_of<float>(mean), (std::vector<float>{2.5f, 4}));
  EXPECT_FLOAT_EQ(values_of<float>(var)[0], 5.0f / 3);
  EXPECT_FLOAT_EQ(values_of<float>(var)[1], 16.0f);
  ASSERT_TRUE(is_ok(run(0.0, {-1}, false, var, mean)));
  EXPECT_FLOAT_EQ(values_of<float>(var)[0], 1.25f);
  EXPECT_FLOAT_EQ(values_of<float>(var)[1], 12.0f);
  // Over dim 0 with keepdim: pairs (1, 2), (2, 2), (3, 2), (4, 10).
  Tensor& var_cols = store.make_empty(ScalarType::kFloat, {1, 4});
  Tensor& mean_cols = store.make_empty(ScalarType::kFloat, {1, 4});
  ASSERT_TRUE(is_ok(run(1.0, {0}, true, var_cols, mean_cols)));
  EXPECT_EQ(values_of<float>(mean_cols), (std::vector<float>{1.5f, 2, 2.5f, 7}));
  EXPECT_EQ(values_of<float>(var_cols), (std::vector<float>{0.5f, 0, 0.5f, 18}));
  // Two elements with correction 2: no degrees of freedom, so NaN for both.
  ASSERT_TRUE(is_ok(run(2.0, {0}, true, var_cols, mean_cols)));
  for (float v : values_of<float>(var_cols)) EXPECT_TRUE(std::isnan(v));
  for (float v : values_of<float>(mean_cols)) EXPECT_TRUE(std::isnan(v));
  // An empty list reduces every dim.
  Tensor& var_all = store.make_empty(ScalarType::kFloat, {});
  Tensor& mean_all = store.make_empty(ScalarType::kFloat, {});
  ASSERT_TRUE(is_ok(run(0.0, {}, false, var_all, mean_all)));
  EXPECT_FLOAT_EQ(values_of<float>(mean_all)[0], 3.25f);
  EXPECT_FLOAT_EQ(values_of<float>(var_all)[0], (5 + 48 + 8 * 0.75f * 0.75f) / 8);
  // Integer input is refused.
  Tensor& ints = store.make<int32_t>({2}, {1, 2});
  Args int_args;
  int_args.tensor(ints).none().none().boolean(false).outs({&var_all, &mean_all});
  EXPECT_TRUE(
      fails_with(run_kernel("aten::var_mean.correction_out", int_args), {"aten::var_mean.correction_out", "self"}));
}

// --- topk ---------------------------------------------------------------------------------

Status run_topk(Tensor& self, int64_t k, int64_t dim, bool largest, Tensor& values, Tensor& indices) {
  Args args;
  args.tensor(self).integer(k).integer(dim).boolean(largest).boolean(true);
  args.outs({&values, &indices});
  return run_kernel("aten::topk.values", args);
}

TEST(KernelReduction, TopkPicksLargestOrSmallestSortedWithTiesInIndexOrder) {
  TensorStore store;
  Tensor& self = store.make<int32_t>({6}, {3, 9, 3, -2, 9, 0});
  Tensor& values = store.make_empty(ScalarType::kInt, {3});
  Tensor& indices = store.make_empty(ScalarType::kLong, {3});
  ASSERT_TRUE(is_ok(run_topk(self, 3, -1, true, values, indices)));
  EXPECT_EQ(values_of<int32_t>(values), (std::vector<int32_t>{9, 9, 3}));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{1, 4, 0}));
  ASSERT_TRUE(is_ok(run_topk(self, 3, 0, false, values, indices)));
  EXPECT_EQ(values_of<int32_t>(values), (std::vector<int32_t>{-2, 0, 3}));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{3, 5, 0}));
}

TEST(KernelReduction, TopkAlongAMiddleDimAndNaNCountsAsLargest) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // [2, 3, 2]; along dim 1 each (outer, inner) column has three values.
  Tensor& self = store.make<float>({2, 3, 2}, {1, 6, 5, nan, 3, 4,  //
                                               0, -1, 2, -3, -4, -2});
  Tensor& values = store.make_empty(ScalarType::kFloat, {2, 2, 2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {2, 2, 2});
  ASSERT_TRUE(is_ok(run_topk(self, 2, 1, true, values, indices)));
  const auto got = values_of<float>(values);
  // Columns: (0,·,0) = {1, 5, 3}; (0,·,1) = {6, nan, 4}; (1,·,0) = {0, 2, -4}; (1,·,1) = {-1, -3, -2}.
  EXPECT_EQ(got[0], 5);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 3);
  EXPECT_EQ(got[3], 6);
  EXPECT_EQ(got[4], 2);
  EXPECT_EQ(got[5], -1);
  EXPECT_EQ(got[6], 0);
  EXPECT_EQ(got[7], -2);
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{1, 1, 2, 0, 1, 0, 0, 2}));
  // Smallest: NaN comes last.
  Tensor& all_values = store.make_empty(ScalarType::kFloat, {2, 3, 2});
  Tensor& all_indices = store.make_empty(ScalarType::kLong, {2, 3, 2});
  ASSERT_TRUE(is_ok(run_topk(self, 3, 1, false, all_values, all_indices)));
  EXPECT_TRUE(std::isnan(values_of<float>(all_values)[5]));
  EXPECT_EQ(values_of<int64_t>(all_indices)[5], 1);
}

TEST(KernelReduction, TopkRejectsKOutOfRangeAndAcceptsKZero) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& values = store.make_empty(ScalarType::kFloat, {2, 4}, bounded());
  Tensor& indices = store.make_empty(ScalarType::kLong, {2, 4}, bounded());
  EXPECT_TRUE(fails_with(run_topk(self, 4, 1, true, values, indices), {"aten::topk.values", "k 4"}));
  EXPECT_TRUE(fails_with(run_topk(self, -1, 1, true, values, indices), {"aten::topk.values", "k -1"}));
  EXPECT_TRUE(fails_with(run_topk(self, 1, 2, true, values, indices), {"aten::topk.values", "dim"}));
  ASSERT_TRUE(is_ok(run_topk(self, 0, 1, true, values, indices)));
  EXPECT_EQ(shape_of(values), (std::vector<int64_t>{2, 0}));
  Tensor& int_indices = store.make_empty(ScalarType::kInt, {2, 1});
  Tensor& one = store.make_empty(ScalarType::kFloat, {2, 1});
  EXPECT_TRUE(fails_with(run_topk(self, 1, 1, true, one, int_indices), {"indices", "int64"}));
}

}  // namespace
}  // namespace etna::kernel_test
