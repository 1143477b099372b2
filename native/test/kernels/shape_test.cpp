#include <limits>
#include <optional>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelShape, ViewCopyInfersMinusOne) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 6}, iota_floats(12));
  Tensor& out = store.make_empty(ScalarType::kFloat, {3, 4});
  Args args;
  args.tensor(self).ints({-1, 4}).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::view_copy.out", args)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values_of<float>(out), iota_floats(12));

  Args bad;
  bad.tensor(self).ints({5, -1}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::view_copy.out", bad), {"aten::view_copy.out", "size", "12"}));
  Args two_unknown;
  two_unknown.tensor(self).ints({-1, -1}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::view_copy.out", two_unknown), {"more than one -1"}));
}

TEST(KernelShape, PermuteCopyMatchesIndexing) {
  TensorStore store;
  const auto values = iota_floats(2 * 3 * 4);
  Tensor& self = store.make<float>({2, 3, 4}, values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {4, 2, 3});
  Args args;
  args.tensor(self).ints({2, 0, -2}).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::permute_copy.out", args)));
  const auto got = values_of<float>(out);
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) EXPECT_EQ(got[(k * 2 + i) * 3 + j], values[(i * 3 + j) * 4 + k]);
    }
  }
  Args repeated;
  repeated.tensor(self).ints({0, 0, 1}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::permute_copy.out", repeated), {"dims", "more than once"}));
}

TEST(KernelShape, TransposeCopy) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kLong, {3, 2});
  Args args;
  args.tensor(self).integer(0).integer(-1).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::transpose_copy.int_out", args)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST(KernelShape, UnsqueezeAndSqueeze) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, iota_floats(6));
  Tensor& unsqueezed = store.make_empty(ScalarType::kFloat, {2, 3, 1});
  Args unsqueeze;
  unsqueeze.tensor(self).integer(-1).tensor(unsqueezed).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::unsqueeze_copy.out", unsqueeze)));
  EXPECT_EQ(shape_of(unsqueezed), (std::vector<int64_t>{2, 3, 1}));

  Tensor& padded = store.make<float>({1, 3, 1}, {7, 8, 9});
  Tensor& first_dim = store.make_empty(ScalarType::kFloat, {3, 1});
  Args dims;
  dims.tensor(padded).ints({0, 1}).tensor(first_dim).same_as(2);  // dim 1 has size 3: kept
  ASSERT_TRUE(is_ok(run_kernel("aten::squeeze_copy.dims_out", dims)));
  EXPECT_EQ(values_of<float>(first_dim), (std::vector<float>{7, 8, 9}));

  Tensor& last_dim = store.make_empty(ScalarType::kFloat, {1, 3});
  Args dim;
  dim.tensor(padded).integer(2).tensor(last_dim).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::squeeze_copy.dim_out", dim)));
  EXPECT_EQ(shape_of(last_dim), (std::vector<int64_t>{1, 3}));

  Tensor& all = store.make_empty(ScalarType::kFloat, {3});
  Args every;
  every.tensor(padded).tensor(all).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::squeeze_copy.out", every)));
  EXPECT_EQ(values_of<float>(all), (std::vector<float>{7, 8, 9}));

  Args range;
  range.tensor(self).integer(2).tensor(unsqueezed).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::unsqueeze_copy.out", range)));  // dim == rank appends a dim
  Args too_far;
  too_far.tensor(self).integer(3).tensor(unsqueezed).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::unsqueeze_copy.out", too_far), {"dim", "3", "out of range"}));
}

TEST(KernelShape, ExpandCopyBroadcasts) {
  TensorStore store;
  Tensor& self = store.make<float>({3, 1}, {1, 2, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 2});
  Args args;
  args.tensor(self).ints({2, -1, 2}).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::expand_copy.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Args bad;
  bad.tensor(self).ints({4, 2}).boolean(false).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::expand_copy.out", bad), {"aten::expand_copy.out", "expand dim 0"}));
}

TEST(KernelShape, SelectCopy) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, iota_floats(6));
  Tensor& column = store.make_empty(ScalarType::kFloat, {2});
  Args args;
  args.tensor(self).integer(1).integer(-1).tensor(column).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::select_copy.int_out", args)));
  EXPECT_EQ(values_of<float>(column), (std::vector<float>{2, 5}));
  Args bad;
  bad.tensor(self).integer(0).integer(2).tensor(column).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::select_copy.int_out", bad), {"index 2", "out of range", "size 2"}));
}

TEST(KernelShape, SliceCopyFollowsPythonRules) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 6}, iota_floats(12));
  struct Case {
    std::optional<int64_t> start, end;
    int64_t step;
    std::vector<float> expected_row0;
  };
  const std::vector<Case> cases = {
      {std::nullopt, std::nullopt, 1, {0, 1, 2, 3, 4, 5}}, {1, 5, 2, {1, 3}},    {-2, std::nullopt, 1, {4, 5}},
      {0, std::numeric_limits<int64_t>::max(), 4, {0, 4}}, {-100, 2, 1, {0, 1}}, {4, 2, 1, {}},
  };
  for (const Case& c : cases) {
    TensorOptions bound;
    bound.dynamism = ShapeDynamism::kBound;
    Tensor& out = store.make_empty(ScalarType::kFloat, {2, 6}, bound);
    Args args;
    args.tensor(self).integer(1);
    if (c.start) args.integer(*c.start);
    else args.none();
    if (c.end) args.integer(*c.end);
    else args.none();
    args.integer(c.step).tensor(out).same_as(5);
    ASSERT_TRUE(is_ok(run_kernel("aten::slice_copy.Tensor_out", args)));
    const int64_t width = static_cast<int64_t>(c.expected_row0.size());
    EXPECT_EQ(shape_of(out), (std::vector<int64_t>{2, width}));
    const auto got = values_of<float>(out);
    for (int64_t j = 0; j < width; ++j) {
      EXPECT_EQ(got[j], c.expected_row0[j]);
      EXPECT_EQ(got[width + j], c.expected_row0[j] + 6);
    }
  }
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 6});
  Args zero_step;
  zero_step.tensor(self).integer(1).none().none().integer(0).tensor(out).same_as(5);
  EXPECT_TRUE(fails_with(run_kernel("aten::slice_copy.Tensor_out", zero_step), {"step", "positive"}));
}

TEST(KernelShape, CatAlongDimsSkipsLegacyEmpty) {
  TensorStore store;
  Tensor& a = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& b = store.make<float>({2, 1}, {5, 6});
  Tensor& empty = store.make_empty(ScalarType::kFloat, {0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  Args args;
  args.tensors({&a, &empty, &b}).integer(-1).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::cat.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 2, 5, 3, 4, 6}));

  Tensor& rows = store.make_empty(ScalarType::kFloat, {4, 2});
  Args dim0;
  dim0.tensors({&a, &a}).integer(0).tensor(rows).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::cat.out", dim0)));
  EXPECT_EQ(values_of<float>(rows), (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4}));

  // Mixed dtypes promote; out's dtype is used.
  Tensor& ints = store.make<int64_t>({2, 1}, {7, 8});
  Tensor& mixed = store.make_empty(ScalarType::kFloat, {2, 3});
  Args promote;
  promote.tensors({&a, &ints}).integer(1).tensor(mixed).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::cat.out", promote)));
  EXPECT_EQ(values_of<float>(mixed), (std::vector<float>{1, 2, 7, 3, 4, 8}));

  Args mismatch;
  mismatch.tensors({&a, &b}).integer(0).tensor(rows).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::cat.out", mismatch), {"aten::cat.out", "does not match"}));
}

TEST(KernelShape, StackInsertsADim) {
  TensorStore store;
  Tensor& a = store.make<float>({2}, {1, 2});
  Tensor& b = store.make<float>({2}, {3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2});
  Args rows;
  rows.tensors({&a, &b}).integer(0).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::stack.out", rows)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 2, 3, 4}));
  Args cols;
  cols.tensors({&a, &b}).integer(-1).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::stack.out", cols)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1, 3, 2, 4}));
}

TEST(KernelShape, SplitWithSizesCopy) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 5}, iota_floats(10));
  Tensor& first = store.make_empty(ScalarType::kFloat, {2, 2});
  Tensor& second = store.make_empty(ScalarType::kFloat, {2, 3});
  Args args;
  args.tensor(self).ints({2, 3}).integer(1).tensors({&first, &second}).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::split_with_sizes_copy.out", args)));
  EXPECT_EQ(values_of<float>(first), (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ(values_of<float>(second), (std::vector<float>{2, 3, 4, 7, 8, 9}));
  Args wrong_total;
  wrong_total.tensor(self).ints({2, 2}).integer(1).tensors({&first, &second}).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::split_with_sizes_copy.out", wrong_total), {"add up to 4", "size 5"}));
}

TEST(KernelShape, ConstantPadNdPadsAndCrops) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3, 4});
  Args args;
  args.tensor(self).ints({1, 1, 0, 1}).real(9.0).tensor(out).same_as(3);  // last dim (1, 1), first dim (0, 1)
  ASSERT_TRUE(is_ok(run_kernel("aten::constant_pad_nd.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{9, 1, 2, 9, 9, 3, 4, 9, 9, 9, 9, 9}));

  Tensor& cropped = store.make_empty(ScalarType::kFloat, {2, 2});
  Args crop;
  crop.tensor(self).ints({-1, 1}).integer(0).tensor(cropped).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::constant_pad_nd.out", crop)));
  EXPECT_EQ(values_of<float>(cropped), (std::vector<float>{2, 0, 4, 0}));

  Args odd;
  odd.tensor(self).ints({1}).integer(0).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::constant_pad_nd.out", odd), {"pad", "even"}));
}

// --- unbind, repeat, tril/triu ------------------------------------------------------------

TEST(KernelShape, UnbindCopySplitsADimIntoItsSlices) {
  TensorStore store;
  Tensor& self = store.make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& a = store.make_empty(ScalarType::kInt, {2});
  Tensor& b = store.make_empty(ScalarType::kInt, {2});
  Tensor& c = store.make_empty(ScalarType::kInt, {2});
  Args args;
  args.tensor(self).integer(-1).tensors({&a, &b, &c}).none();
  ASSERT_TRUE(is_ok(run_kernel("aten::unbind_copy.int_out", args)));
  EXPECT_EQ(values_of<int32_t>(a), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(values_of<int32_t>(b), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(values_of<int32_t>(c), (std::vector<int32_t>{3, 6}));
  Tensor& row = store.make_empty(ScalarType::kInt, {3});
  Args too_few;
  too_few.tensor(self).integer(0).tensors({&row}).none();
  EXPECT_TRUE(fails_with(run_kernel("aten::unbind_copy.int_out", too_few), {"aten::unbind_copy.int_out", "size 2"}));
  Tensor& scalar = store.make<float>({}, {1});
  Args rank0;
  rank0.tensor(scalar).integer(0).tensors({&row}).none();
  EXPECT_TRUE(fails_with(run_kernel("aten::unbind_copy.int_out", rank0), {"rank-0"}));
}

TEST(KernelShape, RepeatTilesSelfAndAddsLeadingDims) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({2}, {7, 8});
  Tensor& out = store.make_empty(ScalarType::kLong, {2, 6});
  Args args;
  args.tensor(self).ints({2, 3}).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::repeat.out", args)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8}));
  // [2, 2] repeated (2, 1): rows tile, columns stay; a transposed self reads through its strides.
  TensorOptions column_major;
  column_major.dim_order = {1, 0};
  Tensor& matrix = store.make<float>({2, 2}, {1, 2, 3, 4}, column_major);
  Tensor& tiled = store.make_empty(ScalarType::kFloat, {4, 2});
  Args strided;
  strided.tensor(matrix).ints({2, 1}).tensor(tiled).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::repeat.out", strided)));
  // Memory {1, 2, 3, 4} in dim order (1, 0) is the matrix [[1, 3], [2, 4]].
  EXPECT_EQ(values_of<float>(tiled), (std::vector<float>{1, 3, 2, 4, 1, 3, 2, 4}));
  Tensor& empty = store.make_empty(ScalarType::kLong, {0, 2});
  Args zero;
  zero.tensor(self).ints({0, 1}).tensor(empty).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::repeat.out", zero)));
  EXPECT_EQ(shape_of(empty), (std::vector<int64_t>{0, 2}));
  Args too_short;
  too_short.tensor(matrix).ints({2}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::repeat.out", too_short), {"aten::repeat.out", "repeats"}));
  Args negative;
  negative.tensor(self).ints({-1}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::repeat.out", negative), {"aten::repeat.out", "negative"}));
}

TEST(KernelShape, TrilAndTriuKeepOneSideOfADiagonalInEveryMatrix) {
  TensorStore store;
  // Two 3x4 matrices of 1..24.
  std::vector<float> values(24);
  for (size_t i = 0; i < 24; ++i) values[i] = static_cast<float>(i + 1);
  Tensor& self = store.make<float>({2, 3, 4}, values);
  for (int64_t diagonal : std::vector<int64_t>{-4, -1, 0, 1, 5, int64_t(1) << 62, -(int64_t(1) << 62)}) {
    for (bool lower : {true, false}) {
      Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 4});
      Args args;
      args.tensor(self).integer(diagonal).tensor(out).same_as(2);
      const char* key = lower ? "aten::tril.out" : "aten::triu.out";
      ASSERT_TRUE(is_ok(run_kernel(key, args))) << key;
      const auto got = values_of<float>(out);
      for (int64_t i = 0; i < 24; ++i) {
        const int64_t r = (i / 4) % 3, c = i % 4;
        const bool keep = lower ? c - r <= diagonal : c - r >= diagonal;
        EXPECT_EQ(got[static_cast<size_t>(i)], keep ? values[static_cast<size_t>(i)] : 0.0f)
            << key << " diagonal " << diagonal << " at " << i;
      }
    }
  }
  Tensor& bools = store.make<bool>({2, 2}, {true, true, true, true});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {2, 2});
  Args bool_args;
  bool_args.tensor(bools).integer(0).tensor(bool_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::triu.out", bool_args)));
  EXPECT_EQ(values_of<bool>(bool_out), (std::vector<bool>{true, true, false, true}));
  Tensor& vector = store.make<float>({3}, {1, 2, 3});
  Tensor& vector_out = store.make_empty(ScalarType::kFloat, {3});
  Args rank1;
  rank1.tensor(vector).integer(0).tensor(vector_out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::tril.out", rank1), {"aten::tril.out", "at least 2 dims"}));
}

}  // namespace
}  // namespace etna::kernel_test
