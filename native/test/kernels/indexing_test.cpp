#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelIndexing, GatherPicksTargetLogProbabilities) {
  // The loss of et_xor_training.pte: gather(log_probs, 1, target.unsqueeze(1)).
  TensorStore store;
  Tensor& log_probs = store.make<float>({3, 2}, {-0.1f, -2.0f, -1.5f, -0.3f, -0.7f, -0.6f});
  Tensor& target = store.make<int64_t>({3, 1}, {0, 1, 1});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3, 1});
  Args args;
  args.tensor(log_probs).integer(1).tensor(target).boolean(false).tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::gather.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-0.1f, -0.3f, -0.6f}));

  Tensor& rows = store.make<int64_t>({2, 2}, {2, 0, 1, 1});
  Tensor& by_rows = store.make_empty(ScalarType::kFloat, {2, 2});
  Args dim0;
  dim0.tensor(log_probs).integer(0).tensor(rows).boolean(false).tensor(by_rows).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::gather.out", dim0)));
  EXPECT_EQ(values_of<float>(by_rows), (std::vector<float>{-0.7f, -2.0f, -1.5f, -0.3f}));
}

TEST(KernelIndexing, GatherChecksEveryIndex) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 1});
  for (int64_t bad : {2, -1}) {
    Tensor& index = store.make<int64_t>({2, 1}, {0, bad});
    Args args;
    args.tensor(self).integer(1).tensor(index).boolean(false).tensor(out).same_as(4);
    EXPECT_TRUE(fails_with(run_kernel("aten::gather.out", args),
                           {"aten::gather.out", "index " + std::to_string(bad), "out of bounds", "size 2"}));
  }
  Tensor& float_index = store.make<float>({2, 1}, {0, 1});
  Args dtype;
  dtype.tensor(self).integer(1).tensor(float_index).boolean(false).tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::gather.out", dtype), {"index", "int64"}));
  Tensor& wide = store.make<int64_t>({3, 1}, {0, 0, 0});
  Args too_big;
  too_big.tensor(self).integer(1).tensor(wide).boolean(false).tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::gather.out", too_big), {"larger than self"}));
}

TEST(KernelIndexing, ScatterValueMakesOneHot) {
  TensorStore store;
  Tensor& zeros = store.make<float>({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor& index = store.make<int64_t>({2, 1}, {2, 0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  Args args;
  args.tensor(zeros).integer(1).tensor(index).real(1.0).tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::scatter.value_out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 0, 1, 1, 0, 0}));
  Tensor& bad = store.make<int64_t>({2, 1}, {3, 0});
  Args range;
  range.tensor(zeros).integer(1).tensor(bad).real(1.0).tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel("aten::scatter.value_out", range), {"index 3", "out of bounds"}));
}

TEST(KernelIndexing, IndexSelectAlongEachDim) {
  TensorStore store;
  Tensor& self = store.make<float>({3, 2}, iota_floats(6));
  Tensor& index = store.make<int32_t>({2}, {2, 0});
  Tensor& rows = store.make_empty(ScalarType::kFloat, {2, 2});
  Args args;
  args.tensor(self).integer(0).tensor(index).tensor(rows).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::index_select.out", args)));
  EXPECT_EQ(values_of<float>(rows), (std::vector<float>{4, 5, 0, 1}));

  Tensor& column = store.make<int64_t>({1}, {1});
  Tensor& cols = store.make_empty(ScalarType::kFloat, {3, 1});
  Args by_col;
  by_col.tensor(self).integer(-1).tensor(column).tensor(cols).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::index_select.out", by_col)));
  EXPECT_EQ(values_of<float>(cols), (std::vector<float>{1, 3, 5}));

  Tensor& bad = store.make<int64_t>({2}, {0, 3});
  Args range;
  range.tensor(self).integer(0).tensor(bad).tensor(rows).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::index_select.out", range), {"index 3", "size 3"}));
}

TEST(KernelIndexing, EmbeddingLooksUpRows) {
  TensorStore store;
  Tensor& weight = store.make<float>({4, 3}, iota_floats(12));
  Tensor& tokens = store.make<int64_t>({2, 2}, {3, 0, 1, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2, 3});
  Args args;
  args.tensor(weight).tensor(tokens).integer(-1).boolean(false).boolean(false).tensor(out).same_as(5);
  ASSERT_TRUE(is_ok(run_kernel("aten::embedding.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{9, 10, 11, 0, 1, 2, 3, 4, 5, 9, 10, 11}));

  Tensor& bad = store.make<int64_t>({1}, {4});
  Tensor& one = store.make_empty(ScalarType::kFloat, {1, 3});
  Args range;
  range.tensor(weight).tensor(bad).integer(-1).boolean(false).boolean(false).tensor(one).same_as(5);
  EXPECT_TRUE(fails_with(run_kernel("aten::embedding.out", range), {"aten::embedding.out", "index 4", "size 4"}));
}

TEST(KernelIndexing, IndexPutWritesKvCacheRows) {
  // cache[:, :, positions] = values, cache float32[1, 2, 5, 3], positions [1, -1].
  TensorStore store;
  Tensor& cache = store.make_empty(ScalarType::kFloat, {1, 2, 5, 3});
  Tensor& positions = store.make<int64_t>({2}, {1, -1});
  const auto new_values = iota_floats(12);
  Tensor& values = store.make<float>({1, 2, 2, 3}, new_values);
  Args args;
  args.tensor(cache).optional_tensors({nullptr, nullptr, &positions}).tensor(values).boolean(false).same_as(0);
  ASSERT_TRUE(is_ok(run_kernel("aten::index_put_", args)));
  const auto got = values_of<float>(cache);
  for (int head = 0; head < 2; ++head) {
    for (int pos = 0; pos < 5; ++pos) {
      for (int d = 0; d < 3; ++d) {
        float expected = 0;
        if (pos == 1) expected = new_values[(head * 2 + 0) * 3 + d];
        if (pos == 4) expected = new_values[(head * 2 + 1) * 3 + d];
        EXPECT_EQ(got[(head * 5 + pos) * 3 + d], expected) << head << "," << pos << "," << d;
      }
    }
  }
}

TEST(KernelIndexing, IndexPutOutAccumulatesDuplicates) {
  TensorStore store;
  Tensor& self = store.make<float>({5}, {1, 1, 1, 1, 1});
  Tensor& index = store.make<int64_t>({3}, {0, 0, 2});
  Tensor& values = store.make<float>({3}, {1, 2, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {5});
  Args args;
  args.tensor(self).optional_tensors({&index}).tensor(values).boolean(true).tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::index_put.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{4, 1, 4, 1, 1}));
  EXPECT_EQ(values_of<float>(self), (std::vector<float>{1, 1, 1, 1, 1}));  // self untouched
}

TEST(KernelIndexing, IndexPutWithBoolMaskAndScalarValue) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& mask = store.make<bool>({2, 2}, {true, false, false, true});
  Tensor& seven = store.make<float>({}, {7});
  Args args;
  args.tensor(self).optional_tensors({&mask}).tensor(seven).boolean(false).same_as(0);
  ASSERT_TRUE(is_ok(run_kernel("aten::index_put_", args)));
  EXPECT_EQ(values_of<float>(self), (std::vector<float>{7, 2, 3, 7}));
}

TEST(KernelIndexing, IndexPutRejectsBadIndicesAndValues) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, iota_floats(6));
  Tensor& index = store.make<int64_t>({1}, {2});
  Tensor& values = store.make<float>({3}, {9, 9, 9});
  Args range;
  range.tensor(self).optional_tensors({&index}).tensor(values).boolean(false).same_as(0);
  EXPECT_TRUE(fails_with(run_kernel("aten::index_put_", range), {"aten::index_put_", "index 2", "dim 0", "size 2"}));

  Tensor& ok_index = store.make<int64_t>({1}, {1});
  Tensor& wrong_values = store.make<float>({2}, {9, 9});
  Args shape;
  shape.tensor(self).optional_tensors({&ok_index}).tensor(wrong_values).boolean(false).same_as(0);
  EXPECT_TRUE(fails_with(run_kernel("aten::index_put_", shape), {"values", "indexed shape", "[1, 3]"}));

  Tensor& int_values = store.make<int64_t>({3}, {9, 9, 9});
  Args dtype;
  dtype.tensor(self).optional_tensors({&ok_index}).tensor(int_values).boolean(false).same_as(0);
  EXPECT_TRUE(fails_with(run_kernel("aten::index_put_", dtype), {"values", "dtype"}));
  EXPECT_EQ(values_of<float>(self), iota_floats(6));  // nothing written on error
}

TEST(KernelIndexing, AdvancedIndexingLayouts) {
  TensorStore store;
  const auto data = iota_floats(2 * 3 * 4);
  Tensor& self = store.make<float>({2, 3, 4}, data);
  auto at = [&](int i, int j, int k) { return data[(i * 3 + j) * 4 + k]; };

  // Adjacent: self[:, [2, 0]] -> [2, 2, 4]
  Tensor& idx = store.make<int64_t>({2}, {2, 0});
  Tensor& adjacent = store.make_empty(ScalarType::kFloat, {2, 2, 4});
  Args a;
  a.tensor(self).optional_tensors({nullptr, &idx}).tensor(adjacent).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::index.Tensor_out", a)));
  auto got = values_of<float>(adjacent);
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 2; ++k) {
      for (int l = 0; l < 4; ++l) EXPECT_EQ(got[(i * 2 + k) * 4 + l], at(i, k == 0 ? 2 : 0, l));
    }
  }

  // Separated by a slice: self[[0, 1], :, [3, 0]] -> broadcast dims first: [2, 3]
  Tensor& first = store.make<int64_t>({2}, {0, 1});
  Tensor& last = store.make<int64_t>({2}, {3, 0});
  Tensor& separated = store.make_empty(ScalarType::kFloat, {2, 3});
  Args s;
  s.tensor(self).optional_tensors({&first, nullptr, &last}).tensor(separated).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::index.Tensor_out", s)));
  got = values_of<float>(separated);
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[b * 3 + j], at(b, j, b == 0 ? 3 : 0));
  }

  // Index tensors broadcast together: self[[[0], [1]], [0, 2, 1]] -> [2, 3, 4]
  Tensor& column = store.make<int64_t>({2, 1}, {0, 1});
  Tensor& row = store.make<int64_t>({3}, {0, 2, 1});
  Tensor& broadcast = store.make_empty(ScalarType::kFloat, {2, 3, 4});
  Args bc;
  bc.tensor(self).optional_tensors({&column, &row}).tensor(broadcast).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::index.Tensor_out", bc)));
  got = values_of<float>(broadcast);
  const int rows[3] = {0, 2, 1};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int l = 0; l < 4; ++l) EXPECT_EQ(got[(i * 3 + j) * 4 + l], at(i, rows[j], l));
    }
  }
}

}  // namespace
}  // namespace etna::kernel_test
