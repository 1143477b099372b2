#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

// Runs executorch_prim::<op>.Scalar on two operands and returns the result slot.
EValue run_prim(const std::string& key, const EValue& a, const EValue& b) {
  Args args;
  args.integer(0).integer(0).integer(0);
  args[0] = a;
  args[1] = b;
  const Status status = run_kernel(key, args);
  EXPECT_TRUE(is_ok(status)) << key;
  return args[2];
}

TEST(KernelPrim, IntegerArithmeticStaysInteger) {
  const EValue seven = EValue::from_int(7), minus_two = EValue::from_int(-2);
  EXPECT_EQ(run_prim("executorch_prim::add.Scalar", seven, minus_two).to_int(), 5);
  EXPECT_EQ(run_prim("executorch_prim::sub.Scalar", seven, minus_two).to_int(), 9);
  EXPECT_EQ(run_prim("executorch_prim::mul.Scalar", seven, minus_two).to_int(), -14);
  // Python floor division and modulo follow the divisor's sign.
  EXPECT_EQ(run_prim("executorch_prim::floordiv.Scalar", seven, minus_two).to_int(), -4);
  EXPECT_EQ(run_prim("executorch_prim::mod.Scalar", seven, minus_two).to_int(), -1);
  EXPECT_EQ(run_prim("executorch_prim::floordiv.int", EValue::from_int(-7), EValue::from_int(2)).to_int(), -4);
  EXPECT_EQ(run_prim("executorch_prim::sym_max.Scalar", seven, minus_two).to_int(), 7);
  EXPECT_EQ(run_prim("executorch_prim::sym_min.Scalar", seven, minus_two).to_int(), -2);
  const EValue quotient = run_prim("executorch_prim::truediv.Scalar", seven, minus_two);
  ASSERT_TRUE(quotient.is_double());
  EXPECT_EQ(quotient.to_double(), -3.5);
}

TEST(KernelPrim, DoubleOperandsGiveDoubles) {
  const EValue a = EValue::from_double(2.5), b = EValue::from_int(2);
  const EValue sum = run_prim("executorch_prim::add.Scalar", a, b);
  ASSERT_TRUE(sum.is_double());
  EXPECT_EQ(sum.to_double(), 4.5);
  EXPECT_EQ(run_prim("executorch_prim::floordiv.Scalar", EValue::from_double(-2.5), b).to_double(), -2.0);
}

TEST(KernelPrim, ComparisonsGiveBools) {
  const EValue three = EValue::from_int(3), half = EValue::from_double(3.5);
  EXPECT_TRUE(run_prim("executorch_prim::lt.Scalar", three, half).to_bool());
  EXPECT_FALSE(run_prim("executorch_prim::gt.Scalar", three, half).to_bool());
  EXPECT_TRUE(run_prim("executorch_prim::le.Scalar", three, three).to_bool());
  EXPECT_TRUE(run_prim("executorch_prim::ge.Scalar", half, three).to_bool());
  EXPECT_TRUE(run_prim("executorch_prim::eq.Scalar", three, EValue::from_double(3.0)).to_bool());
  EXPECT_TRUE(run_prim("executorch_prim::eq.Scalar", EValue::from_bool(true), EValue::from_int(1)).to_bool());
}

TEST(KernelPrim, NegAndDivisionByZero) {
  Args neg;
  neg.integer(5).integer(0);
  ASSERT_TRUE(is_ok(run_kernel("executorch_prim::neg.Scalar", neg)));
  EXPECT_EQ(neg[1].to_int(), -5);

  Args by_zero;
  by_zero.integer(1).integer(0).integer(0);
  EXPECT_TRUE(fails_with(run_kernel("executorch_prim::floordiv.Scalar", by_zero),
                         {"executorch_prim::floordiv.Scalar", "division by zero"}));

  Args bad_kind;
  bad_kind.string("x").integer(1).integer(0);
  EXPECT_TRUE(fails_with(run_kernel("executorch_prim::add.Scalar", bad_kind), {"argument 0 (a)", "String"}));
}

TEST(KernelPrim, SymSizeAndNumel) {
  TensorStore store;
  Tensor& t = store.make_empty(ScalarType::kFloat, {2, 5, 3});
  Args size;
  size.tensor(t).integer(-2).integer(0);
  ASSERT_TRUE(is_ok(run_kernel("aten::sym_size.int", size)));
  EXPECT_EQ(size[2].to_int(), 5);

  Args numel;
  numel.tensor(t).integer(0);
  ASSERT_TRUE(is_ok(run_kernel("aten::sym_numel", numel)));
  EXPECT_EQ(numel[1].to_int(), 30);

  Args range;
  range.tensor(t).integer(3).integer(0);
  EXPECT_TRUE(fails_with(run_kernel("aten::sym_size.int", range), {"aten::sym_size.int", "dim", "3"}));

  // The result slot must be a scalar slot, never a tensor the executor owns.
  Args tensor_slot;
  tensor_slot.tensor(t).integer(0).tensor(t);
  EXPECT_TRUE(fails_with(run_kernel("aten::sym_size.int", tensor_slot), {"argument 2 (out)", "Tensor"}));
}

TEST(KernelPrim, EtViewAliasesSelfData) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  Tensor& view = store.make_empty(ScalarType::kFloat, {3, 2}, bound);
  view.set_data(nullptr, 0);  // unplanned
  Args args;
  args.tensor(self).ints({3, -1}).tensor(view);
  ASSERT_TRUE(is_ok(run_kernel("executorch_prim::et_view.default", args)));
  EXPECT_EQ(view.data(), self.data());
  EXPECT_EQ(shape_of(view), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values_of<float>(view), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  Args mismatch;
  mismatch.tensor(self).ints({4, 2}).tensor(view);
  EXPECT_TRUE(fails_with(run_kernel("executorch_prim::et_view.default", mismatch), {"et_view", "[4, 2]"}));

  Tensor& ints = store.make_empty(ScalarType::kLong, {3, 2}, bound);
  Args dtype;
  dtype.tensor(self).ints({3, 2}).tensor(ints);
  EXPECT_TRUE(fails_with(run_kernel("executorch_prim::et_view.default", dtype), {"out", "float32"}));
}

TEST(KernelPrim, LocalScalarDense) {
  TensorStore store;
  Tensor& f = store.make<float>({1}, {2.5f});
  Args args;
  args.tensor(f).none();
  ASSERT_TRUE(is_ok(run_kernel("aten::_local_scalar_dense", args)));
  ASSERT_TRUE(args[1].is_double());
  EXPECT_EQ(args[1].to_double(), 2.5);
}

TEST(KernelPrim, EtCopyIndexGrowsTheLeadingDimAndWritesEachRow) {
  TensorStore store;
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  // Planned for 3 rows of 2; starts empty, as a lowered map loop's accumulator does.
  Tensor& copy_to = store.make_empty(ScalarType::kInt, {3, 2}, bound);
  const int64_t empty[] = {0, 2};
  ASSERT_TRUE(copy_to.resize(2, empty).is_ok());
  for (int32_t i = 0; i < 3; ++i) {
    Tensor& row = store.make<int32_t>({2}, {10 * i, 10 * i + 1});
    Args args;
    args.tensor(copy_to).tensor(row).integer(i);
    ASSERT_TRUE(is_ok(run_kernel("executorch_prim::et_copy_index.tensor", args))) << i;
    EXPECT_EQ(shape_of(copy_to), (std::vector<int64_t>{i + 1, 2}));
  }
  EXPECT_EQ(values_of<int32_t>(copy_to), (std::vector<int32_t>{0, 1, 10, 11, 20, 21}));
  // Rewriting an existing row keeps the shape.
  Tensor& again = store.make<int32_t>({2}, {-1, -2});
  Args rewrite;
  rewrite.tensor(copy_to).tensor(again).integer(1);
  ASSERT_TRUE(is_ok(run_kernel("executorch_prim::et_copy_index.tensor", rewrite)));
  EXPECT_EQ(values_of<int32_t>(copy_to), (std::vector<int32_t>{0, 1, -1, -2, 20, 21}));
}

TEST(KernelPrim, EtCopyIndexRejectsMismatchesAndOverflowWithoutWriting) {
  TensorStore store;
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  Tensor& copy_to = store.make_empty(ScalarType::kFloat, {2, 2}, bound);
  const std::string key = "executorch_prim::et_copy_index.tensor";
  auto call = [&](Tensor& from, int64_t index) {
    Args args;
    args.tensor(copy_to).tensor(from).integer(index);
    return run_kernel(key, args);
  };
  Tensor& row = store.make<float>({2}, {1, 2});
  EXPECT_TRUE(fails_with(call(row, 2), {key, "copy_to"}));  // a third row exceeds the planned bytes
  EXPECT_TRUE(fails_with(call(row, -1), {key, "index"}));
  Tensor& wide = store.make<float>({3}, {1, 2, 3});
  EXPECT_TRUE(fails_with(call(wide, 1), {key, "does not match"}));
  Tensor& ints = store.make<int32_t>({2}, {1, 2});
  EXPECT_TRUE(fails_with(call(ints, 0), {key, "copy_to", "int32"}));
  Tensor& matrix = store.make<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(fails_with(call(matrix, 0), {key, "one more dim"}));
  EXPECT_EQ(values_of<float>(copy_to), (std::vector<float>{0, 0, 0, 0}));
  Args with_return;
  with_return.tensor(copy_to).tensor(row).integer(0).none();
  EXPECT_FALSE(run_kernel(key, with_return).is_ok());
}

}  // namespace
}  // namespace etna::kernel_test
