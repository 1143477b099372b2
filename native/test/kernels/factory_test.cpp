#include <cmath>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelFactory, FullZerosOnes) {
  TensorStore store;
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2});
  Args full;
  full.ints({2, 2}).real(2.5).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::full.out", full)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>(4, 2.5f)));

  Args zeros;
  zeros.ints({2, 2}).tensor(out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::zeros.out", zeros)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>(4, 0.0f)));

  Tensor& ints = store.make_empty(ScalarType::kLong, {3});
  Args ones;
  ones.ints({3}).tensor(ints).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::ones.out", ones)));
  EXPECT_EQ(values_of<int64_t>(ints), (std::vector<int64_t>{1, 1, 1}));

  Args negative;
  negative.ints({-2, 2}).real(1.0).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::full.out", negative), {"aten::full.out", "negative size"}));
}

TEST(KernelFactory, FullLikeAndScalarTensor) {
  TensorStore store;
  Tensor& self = store.make<float>({3}, {1, 2, 3});
  Tensor& out = store.make_empty(ScalarType::kLong, {3});
  Args like;
  like.tensor(self).integer(-4).integer(1).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::full_like.out", like)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{-4, -4, -4}));

  Tensor& scalar = store.make_empty(ScalarType::kFloat, {});
  Args s;
  s.integer(7).tensor(scalar).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::scalar_tensor.out", s)));
  EXPECT_EQ(values_of<float>(scalar), (std::vector<float>{7}));

  Tensor& byte = store.make_empty(ScalarType::kByte, {});
  Args overflow;
  overflow.integer(256).tensor(byte).same_as(1);
  EXPECT_TRUE(fails_with(run_kernel("aten::scalar_tensor.out", overflow), {"Int(256)", "uint8"}));

  Tensor& vector_out = store.make_empty(ScalarType::kFloat, {1});
  Args rank;
  rank.integer(1).tensor(vector_out).same_as(1);
  EXPECT_TRUE(fails_with(run_kernel("aten::scalar_tensor.out", rank), {"aten::scalar_tensor.out", "rank"}));
}

TEST(KernelFactory, ArangeIntegerAndFloating) {
  TensorStore store;
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  Tensor& ints = store.make_empty(ScalarType::kLong, {10}, bound);
  Args int_range;
  int_range.integer(5).integer(-2).integer(-3).tensor(ints).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::arange.start_out", int_range)));
  EXPECT_EQ(values_of<int64_t>(ints), (std::vector<int64_t>{5, 2, -1}));

  Tensor& floats = store.make_empty(ScalarType::kFloat, {10}, bound);
  Args float_range;
  float_range.real(0.0).real(1.0).real(0.25).tensor(floats).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::arange.start_out", float_range)));
  EXPECT_EQ(values_of<float>(floats), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));

  Args end_only;
  end_only.integer(4).tensor(ints).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::arange.out", end_only)));
  EXPECT_EQ(values_of<int64_t>(ints), (std::vector<int64_t>{0, 1, 2, 3}));

  Args inconsistent;
  inconsistent.integer(0).integer(5).integer(-1).tensor(ints).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::arange.start_out", inconsistent), {"inconsistent", "step"}));
  Args zero_step;
  zero_step.integer(0).integer(5).integer(0).tensor(ints).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::arange.start_out", zero_step), {"step must not be zero"}));
  Args too_long;
  too_long.integer(0).integer(11).integer(1).tensor(ints).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::arange.start_out", too_long), {"aten::arange.start_out", "out"}));
}

TEST(KernelFactory, EmptyDimOrderResizesOutInTheRequestedDimOrder) {
  TensorStore store;
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 4}, bound);
  Args args;
  args.ints({2, 3, 1}).none().tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_empty_dim_order.out", args)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{2, 3, 1}));
  Args row_major;
  row_major.ints({1, 2, 2}).ints({0, 1, 2}).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_empty_dim_order.out", row_major)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{1, 2, 2}));

  TensorOptions channels_last = bound;
  channels_last.dim_order = {0, 2, 3, 1};
  Tensor& nhwc = store.make_empty(ScalarType::kBool, {1, 3, 2, 2}, channels_last);
  Args nhwc_args;
  nhwc_args.ints({1, 3, 2, 2}).ints({0, 2, 3, 1}).tensor(nhwc).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_empty_dim_order.out", nhwc_args)));
  Args none_for_nhwc;
  none_for_nhwc.ints({1, 3, 2, 2}).none().tensor(nhwc).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("dim_order_ops::_empty_dim_order.out", none_for_nhwc), {"row-major"}));
  Args wrong_order;
  wrong_order.ints({2, 3, 4}).ints({0, 2, 1}).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("dim_order_ops::_empty_dim_order.out", wrong_order), {"dim_order"}));
  Args too_big;
  too_big.ints({2, 3, 5}).none().tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("dim_order_ops::_empty_dim_order.out", too_big), {"out"}));
  Args negative;
  negative.ints({2, -3, 4}).none().tensor(out).same_as(2);
  EXPECT_FALSE(run_kernel("dim_order_ops::_empty_dim_order.out", negative).is_ok());
}

}  // namespace
}  // namespace etna::kernel_test
