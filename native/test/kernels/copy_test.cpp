#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelCopy, CloneAndAliasCopy) {
  TensorStore store;
  Tensor& self = store.make<int32_t>({2, 2}, {1, -2, 3, -4});
  Tensor& out = store.make_empty(ScalarType::kInt, {2, 2});
  Args clone;
  clone.tensor(self).none().tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::clone.out", clone)));
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{1, -2, 3, -4}));

  Tensor& alias = store.make_empty(ScalarType::kInt, {2, 2});
  Args alias_args;
  alias_args.tensor(self).tensor(alias).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::alias_copy.out", alias_args)));
  EXPECT_EQ(values_of<int32_t>(alias), (std::vector<int32_t>{1, -2, 3, -4}));

  Args bad_format;
  bad_format.tensor(self).integer(7).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::clone.out", bad_format), {"memory_format", "7"}));
}

TEST(KernelCopy, ToDimOrderCopyConvertsDtypes) {
  // npr_multi_method.pte converts an int64 constant to float32 before adding.
  TensorStore store;
  Tensor& ints = store.make<int64_t>({3}, {1, -2, 40000000000});
  Tensor& floats = store.make_empty(ScalarType::kFloat, {3});
  Args to_float;
  to_float.tensor(ints).boolean(false).ints({0}).tensor(floats).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_to_dim_order_copy.out", to_float)));
  EXPECT_EQ(values_of<float>(floats), (std::vector<float>{1.0f, -2.0f, 4e10f}));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& source = store.make<float>({4}, {2.9f, -2.9f, 1e20f, nan});
  Tensor& truncated = store.make_empty(ScalarType::kInt, {4});
  Args to_int;
  to_int.tensor(source).boolean(false).none().tensor(truncated).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_to_dim_order_copy.out", to_int)));
  EXPECT_EQ(values_of<int32_t>(truncated), (std::vector<int32_t>{2, -2, std::numeric_limits<int32_t>::max(), 0}));

  Tensor& flags = store.make_empty(ScalarType::kBool, {4});
  Args to_bool;
  to_bool.tensor(source).boolean(false).none().tensor(flags).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::_to_copy.out", to_bool)));
  EXPECT_EQ(values_of<bool>(flags), (std::vector<bool>{true, true, true, true}));
}

TEST(KernelCopy, ToDimOrderCopyWritesChannelsLast) {
  // NCHW [1, 2, 2, 2] to dim order [0, 2, 3, 1]: memory becomes N, H, W, C.
  TensorStore store;
  Tensor& self = store.make<float>({1, 2, 2, 2}, {0, 1, 2, 3, 10, 11, 12, 13});
  TensorOptions channels_last;
  channels_last.dim_order = {0, 2, 3, 1};
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 2, 2}, channels_last);
  Args args;
  args.tensor(self).boolean(false).ints({0, 2, 3, 1}).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_to_dim_order_copy.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13}));

  // And back: a channels-last input read into a contiguous clone.
  Tensor& back = store.make_empty(ScalarType::kFloat, {1, 2, 2, 2});
  Args clone;
  clone.tensor(out).boolean(false).ints({0, 1, 2, 3}).tensor(back).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_clone_dim_order.out", clone)));
  EXPECT_EQ(values_of<float>(back), (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));

  // Asking for a dim order the out tensor does not have is reported.
  Tensor& contiguous = store.make_empty(ScalarType::kFloat, {1, 2, 2, 2});
  Args mismatch;
  mismatch.tensor(self).boolean(false).ints({0, 2, 3, 1}).tensor(contiguous).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("dim_order_ops::_to_dim_order_copy.out", mismatch), {"dim_order"}));
  Args not_permutation;
  not_permutation.tensor(self).boolean(false).ints({0, 0, 1, 2}).tensor(contiguous).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("dim_order_ops::_to_dim_order_copy.out", not_permutation), {"permutation"}));
}

TEST(KernelCopy, CopyInPlaceBroadcastsAndReturnsSelf) {
  TensorStore store;
  Tensor& state = store.make<float>({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor& src = store.make<int64_t>({3}, {1, 2, 3});
  Args args;
  args.tensor(state).tensor(src).boolean(false).none();  // the return slot starts as a separate value
  ASSERT_TRUE(is_ok(run_kernel("aten::copy_", args)));
  EXPECT_EQ(values_of<float>(state), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  ASSERT_TRUE(args[3].is_tensor());
  EXPECT_EQ(&args[3].to_tensor(), &state);

  Tensor& wrong = store.make<float>({2}, {1, 2});
  Args bad;
  bad.tensor(state).tensor(wrong).boolean(false).same_as(0);
  EXPECT_TRUE(fails_with(run_kernel("aten::copy_", bad), {"aten::copy_", "src [2]", "broadcast", "self [2, 3]"}));
}

TEST(KernelCopy, CopyOutTakesSelfShapeAndSrcValues) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 2}, {9, 9, 9, 9});
  Tensor& src = store.make<float>({1, 2}, {5, 6});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2});
  Args args;
  args.tensor(self).tensor(src).boolean(false).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::copy.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{5, 6, 5, 6}));
}

}  // namespace
}  // namespace etna::kernel_test
