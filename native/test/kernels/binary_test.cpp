#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

// Row-major linear index of `target` position `index` inside a tensor of
// `sizes` broadcast to `target` (dims of size 1 repeat; shapes right-aligned).
int64_t broadcast_source(const std::vector<int64_t>& sizes, const std::vector<int64_t>& target, int64_t index) {
  std::vector<int64_t> position(target.size());
  for (size_t d = target.size(); d-- > 0;) {
    position[d] = index % target[d];
    index /= target[d];
  }
  int64_t source = 0;
  const size_t offset = target.size() - sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d) {
    const int64_t p = sizes[d] == 1 ? 0 : position[offset + d];
    source = source * sizes[d] + p;
  }
  return source;
}

int64_t count(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

TEST(KernelBinary, AddOutAddsWithAlpha) {
  TensorStore store;
  Tensor& a = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& b = store.make<float>({2, 2}, {10, 20, 30, 40});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2});
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", a, b, 2, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{21, 42, 63, 84}));
}

TEST(KernelBinary, BroadcastingMatchesIndependentIndexing) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{1}, {2, 3}}, {{}, {3, 2}}, {{5, 1, 1, 2}, {1, 3, 1}}, {{2, 0, 3}, {3}}};
  Lcg rng(7);
  for (const auto& [shape_a, shape_b] : cases) {
    std::vector<int64_t> target(std::max(shape_a.size(), shape_b.size()));
    for (size_t i = 0; i < target.size(); ++i) {
      const int64_t da = i < shape_a.size() ? shape_a[shape_a.size() - 1 - i] : 1;
      const int64_t db = i < shape_b.size() ? shape_b[shape_b.size() - 1 - i] : 1;
      target[target.size() - 1 - i] = da == 1 ? db : da;
    }
    TensorStore store;
    const auto va = rng.floats(static_cast<size_t>(count(shape_a)));
    const auto vb = rng.floats(static_cast<size_t>(count(shape_b)));
    Tensor& a = store.make<float>(shape_a, va);
    Tensor& b = store.make<float>(shape_b, vb);
    Tensor& out = store.make_empty(ScalarType::kFloat, target);
    ASSERT_TRUE(is_ok(run_binary("aten::mul.out", a, b, out)));
    const auto got = values_of<float>(out);
    for (int64_t i = 0; i < count(target); ++i) {
      const float expected = va[broadcast_source(shape_a, target, i)] * vb[broadcast_source(shape_b, target, i)];
      EXPECT_EQ(got[i], expected) << "element " << i;
    }
  }
}

TEST(KernelBinary, PromotesInt64PlusFloatToFloat) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({3}, {1, -2, 3});
  Tensor& b = store.make<float>({3}, {0.5f, 0.25f, 2.0f});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", a, b, 1, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1.5f, -1.75f, 5.0f}));
}

TEST(KernelBinary, IntegerAddKeepsIntegersAndWraps) {
  TensorStore store;
  const int64_t big = std::numeric_limits<int64_t>::max();
  Tensor& a = store.make<int64_t>({2}, {big, 5});
  Tensor& b = store.make<int64_t>({2}, {1, 7});
  Tensor& out = store.make_empty(ScalarType::kLong, {2});
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", a, b, 1, out)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 12}));
}

TEST(KernelBinary, ZeroDimFloatDoesNotWidenFloatTensorButPromotesInts) {
  TensorStore store;
  // float32[2] + float64 rank-0: result float32 (so out float32 is fine).
  Tensor& f = store.make<float>({2}, {1, 2});
  Tensor& d = store.make<double>({}, {0.5});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", f, d, 1, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1.5f, 2.5f}));
  // int64[2] + float64 rank-0: result is floating, so an int64 out is rejected.
  Tensor& i = store.make<int64_t>({2}, {1, 2});
  Tensor& int_out = store.make_empty(ScalarType::kLong, {2});
  EXPECT_TRUE(fails_with(run_binary("aten::add.out", i, d, 1, int_out), {"aten::add.out", "float64", "int64"}));
}

TEST(KernelBinary, ScalarFormsAndReverseSub) {
  TensorStore store;
  Tensor& a = store.make<float>({3}, {1, 2, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  {
    Args args;
    args.tensor(a).real(0.5).integer(2).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::add.Scalar_out", args)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{2, 3, 4}));
  }
  {
    Args args;
    args.tensor(a).integer(1).integer(1).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::sub.Scalar_out", args)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 1, 2}));
  }
  {
    // rsub: other - alpha * self = 10 - 2 * x
    Args args;
    args.tensor(a).integer(10).integer(2).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::rsub.Scalar_out", args)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{8, 6, 4}));
  }
  {
    Args args;
    args.tensor(a).real(2.0).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::mul.Scalar_out", args)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{2, 4, 6}));
  }
  {
    Args args;
    args.tensor(a).integer(4).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::div.Scalar_out", args)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{0.25f, 0.5f, 0.75f}));
  }
}

TEST(KernelBinary, IntTensorTimesDoubleScalarIsFloat) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({2}, {3, -4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  Args args;
  args.tensor(a).real(0.5).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::mul.Scalar_out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1.5f, -2.0f}));
  Tensor& int_out = store.make_empty(ScalarType::kLong, {2});
  Args bad;
  bad.tensor(a).real(0.5).tensor(int_out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::mul.Scalar_out", bad), {"cannot be cast", "int64"}));
}

TEST(KernelBinary, SubtractsWithAlphaAndRejectsBoolAndFloatAlphaForInts) {
  TensorStore store;
  Tensor& a = store.make<float>({2}, {5, 6});
  Tensor& b = store.make<float>({2}, {1, 2});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2});
  ASSERT_TRUE(is_ok(run_binary("aten::sub.out", a, b, 0.5, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{4.5f, 5.0f}));

  Tensor& flags = store.make<bool>({2}, {true, false});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {2});
  EXPECT_TRUE(fails_with(run_binary("aten::sub.out", flags, flags, 1, bool_out), {"aten::sub.out", "bool"}));

  Tensor& ints = store.make<int32_t>({2}, {1, 2});
  Tensor& int_out = store.make_empty(ScalarType::kInt, {2});
  EXPECT_TRUE(fails_with(run_binary("aten::sub.out", ints, ints, 1.5, int_out), {"alpha", "Double(1.5)", "int32"}));
}

TEST(KernelBinary, TrueDivisionOfIntegersIsFloat) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({3}, {7, -7, 1});
  Tensor& b = store.make<int64_t>({3}, {2, 2, 0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  ASSERT_TRUE(is_ok(run_binary("aten::div.out", a, b, out)));
  const auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 3.5f);
  EXPECT_EQ(got[1], -3.5f);
  EXPECT_TRUE(std::isinf(got[2]) && got[2] > 0);
}

TEST(KernelBinary, DivisionRoundingModes) {
  TensorStore store;
  const std::vector<int64_t> a_values = {7, -7, 7, -7, 6};
  const std::vector<int64_t> b_values = {2, 2, -2, -2, 3};
  Tensor& a = store.make<int64_t>({5}, a_values);
  Tensor& b = store.make<int64_t>({5}, b_values);
  Tensor& out = store.make_empty(ScalarType::kLong, {5});
  {
    Args args;
    args.tensor(a).tensor(b).string("trunc").tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::div.out_mode", args)));
    EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{3, -3, -3, 3, 2}));
  }
  {
    Args args;
    args.tensor(a).tensor(b).string("floor").tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::div.out_mode", args)));
    EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{3, -4, -4, 3, 2}));
  }
  Tensor& fa = store.make<float>({4}, {7.5f, -7.5f, 1.0f, -0.5f});
  Tensor& fb = store.make<float>({4}, {2.0f, 2.0f, 0.0f, 4.0f});
  Tensor& fout = store.make_empty(ScalarType::kFloat, {4});
  {
    Args args;
    args.tensor(fa).tensor(fb).string("floor").tensor(fout).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::div.out_mode", args)));
    const auto got = values_of<float>(fout);
    EXPECT_EQ(got[0], 3.0f);
    EXPECT_EQ(got[1], -4.0f);
    EXPECT_TRUE(std::isinf(got[2]));
    EXPECT_EQ(got[3], -1.0f);
  }
  {
    Args args;
    args.tensor(fa).tensor(fb).none().tensor(fout).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::div.out_mode", args)));
    EXPECT_EQ(values_of<float>(fout)[1], -3.75f);
  }
}

TEST(KernelBinary, IntegerDivisionByZeroAndBadModeAreErrors) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({2}, {1, 2});
  Tensor& b = store.make<int64_t>({2}, {1, 0});
  Tensor& out = store.make_empty(ScalarType::kLong, {2});
  Args args;
  args.tensor(a).tensor(b).string("floor").tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::div.out_mode", args), {"aten::div.out_mode", "division by zero"}));
  Args mode;
  mode.tensor(a).tensor(b).string("round").tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::div.out_mode", mode), {"rounding_mode", "round"}));
}

TEST(KernelBinary, IntegerRemainderTakesTheDivisorsSign) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({8}, {7, -7, 7, -7, 6, 0, std::numeric_limits<int64_t>::min(), -9});
  Tensor& b = store.make<int64_t>({8}, {3, 3, -3, -3, 3, -5, -1, 4});
  Tensor& out = store.make_empty(ScalarType::kLong, {8});
  Args args;
  args.tensor(a).tensor(b).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Tensor_out", args)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{1, 2, -2, -1, 0, 0, 0, 3}));
  // An int64 position modulo a ring's length, as the sliding-window caches compute it; int32 keeps its dtype.
  Tensor& positions = store.make<int32_t>({5}, {0, 5, 9, 10, -1});
  Tensor& rows = store.make_empty(ScalarType::kInt, {5});
  Args scalar;
  scalar.tensor(positions).integer(10).tensor(rows).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Scalar_out", scalar)));
  EXPECT_EQ(values_of<int32_t>(rows), (std::vector<int32_t>{0, 5, 9, 0, 9}));
  Tensor& small = store.make<int8_t>({2}, {-128, 127});
  Tensor& small_out = store.make_empty(ScalarType::kChar, {2});
  Args negative;
  negative.tensor(small).integer(-3).tensor(small_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Scalar_out", negative)));
  EXPECT_EQ(values_of<int8_t>(small_out), (std::vector<int8_t>{-2, -2}));
}

TEST(KernelBinary, IntegerRemainderByZeroIsAnError) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({2}, {1, 2});
  Tensor& b = store.make<int64_t>({2}, {1, 0});
  Tensor& out = store.make_empty(ScalarType::kLong, {2});
  Args args;
  args.tensor(a).tensor(b).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::remainder.Tensor_out", args), {"aten::remainder.Tensor_out", "by zero"}));
  Args scalar;
  scalar.tensor(a).integer(0).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::remainder.Scalar_out", scalar), {"aten::remainder.Scalar_out", "by zero"}));
  Tensor& flags = store.make<bool>({2}, {true, false});
  Tensor& flags_out = store.make_empty(ScalarType::kBool, {2});
  Args bools;
  bools.tensor(flags).tensor(flags).tensor(flags_out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::remainder.Tensor_out", bools), {"aten::remainder.Tensor_out", "bool"}));
}

TEST(KernelBinary, FloatRemainderAsPyTorchsFmodRule) {
  TensorStore store;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a_values = {7.5f, -7.5f, 7.5f, -7.5f, 4.0f, -4.0f, -0.0f,
                                       0.0f, -1.0f, 1.0f, 1.0f,  inf,  nan,   5.0f};
  const std::vector<float> b_values = {2.0f,  2.0f, -2.0f, -2.0f, -2.0f, 2.0f, 2.0f,
                                       -2.0f, inf,  inf,   0.0f,  2.0f,  2.0f, nan};
  Tensor& a = store.make<float>({14}, a_values);
  Tensor& b = store.make<float>({14}, b_values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {14});
  Args args;
  args.tensor(a).tensor(b).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Tensor_out", args)));
  const auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], 0.5f);
  EXPECT_EQ(got[2], -0.5f);
  EXPECT_EQ(got[3], -1.5f);
  // A zero remainder keeps fmod's sign (a's), not the divisor's.
  EXPECT_EQ(got[4], 0.0f);
  EXPECT_FALSE(std::signbit(got[4]));
  EXPECT_EQ(got[5], 0.0f);
  EXPECT_TRUE(std::signbit(got[5]));
  EXPECT_TRUE(std::signbit(got[6]));
  EXPECT_FALSE(std::signbit(got[7]));
  // A finite a over an infinite b: a itself, or b where their signs differ.
  EXPECT_EQ(got[8], inf);
  EXPECT_EQ(got[9], 1.0f);
  for (size_t i : {10, 11, 12, 13}) EXPECT_TRUE(std::isnan(got[i])) << i;
  // A double Scalar divisor over an int64 tensor promotes to float32.
  Tensor& ints = store.make<int64_t>({3}, {5, -5, 3});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {3});
  Args scalar;
  scalar.tensor(ints).real(1.5).tensor(float_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Scalar_out", scalar)));
  EXPECT_EQ(values_of<float>(float_out), (std::vector<float>{0.5f, 1.0f, 0.0f}));
  Tensor& wide = store.make<double>({2}, {-1e-20, 1e300});
  Tensor& wide_out = store.make_empty(ScalarType::kDouble, {2});
  Args doubles;
  doubles.tensor(wide).real(3.0).tensor(wide_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::remainder.Scalar_out", doubles)));
  EXPECT_EQ(values_of<double>(wide_out)[0], 3.0);  // -1e-20 + 3 rounds to 3, as PyTorch's
  EXPECT_EQ(values_of<double>(wide_out)[1], std::fmod(1e300, 3.0));
}

TEST(KernelBinary, ComparisonsScalarAndTensor) {
  TensorStore store;
  Tensor& a = store.make<float>({4}, {0, 1, 2, 3});
  Tensor& b = store.make<float>({4}, {0, 2, 2, 1});
  Tensor& out = store.make_empty(ScalarType::kBool, {4});
  struct Case {
    const char* key;
    bool tensor_other;
    std::vector<bool> expected;
  };
  const std::vector<Case> cases = {
      {"aten::eq.Scalar_out", false, {false, false, true, false}},
      {"aten::ne.Scalar_out", false, {true, true, false, true}},
      {"aten::lt.Scalar_out", false, {true, true, false, false}},
      {"aten::gt.Scalar_out", false, {false, false, false, true}},
      {"aten::le.Scalar_out", false, {true, true, true, false}},
      {"aten::ge.Scalar_out", false, {false, false, true, true}},
      {"aten::eq.Tensor_out", true, {true, false, true, false}},
      {"aten::ne.Tensor_out", true, {false, true, false, true}},
      {"aten::lt.Tensor_out", true, {false, true, false, false}},
      {"aten::gt.Tensor_out", true, {false, false, false, true}},
      {"aten::le.Tensor_out", true, {true, true, true, false}},
      {"aten::ge.Tensor_out", true, {true, false, true, true}},
  };
  for (const Case& c : cases) {
    Args args;
    args.tensor(a);
    if (c.tensor_other) args.tensor(b);
    else args.integer(2);
    args.tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel(c.key, args))) << c.key;
    EXPECT_EQ(values_of<bool>(out), c.expected) << c.key;
  }
}

TEST(KernelBinary, CompareIntTensorWithFractionalScalarPromotes) {
  TensorStore store;
  Tensor& a = store.make<int64_t>({3}, {1, 2, 3});
  Tensor& out = store.make_empty(ScalarType::kBool, {3});
  Args args;
  args.tensor(a).real(1.5).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::gt.Scalar_out", args)));
  EXPECT_EQ(values_of<bool>(out), (std::vector<bool>{false, true, true}));
}

TEST(KernelBinary, WhereSelectsWithBroadcasting) {
  // The shape of et_model_constant_buffer.pte: where(m == 0, 1.1, m).
  TensorStore store;
  Tensor& condition = store.make<bool>({3}, {true, false, true});
  Tensor& constant = store.make<float>({}, {1.1f});
  Tensor& m = store.make<float>({3}, {0, 5, 0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  Args args;
  args.tensor(condition).tensor(constant).tensor(m).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::where.self_out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1.1f, 5.0f, 1.1f}));

  Tensor& bad_condition = store.make<float>({3}, {1, 0, 1});
  Args bad;
  bad.tensor(bad_condition).tensor(constant).tensor(m).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::where.self_out", bad), {"condition", "bool"}));
}

TEST(KernelBinary, MaskedFillBroadcastsMask) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& mask = store.make<bool>({3}, {true, false, true});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  ASSERT_TRUE(is_ok(run_binary("aten::masked_fill.Scalar_out", self, mask, -1.0, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-1, 2, -1, -1, 5, -1}));

  Tensor& bytes = store.make<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& byte_out = store.make_empty(ScalarType::kByte, {2, 3});
  EXPECT_TRUE(
      fails_with(run_binary("aten::masked_fill.Scalar_out", bytes, mask, 300, byte_out), {"Int(300)", "uint8"}));
}

TEST(KernelBinary, PowTensorScalar) {
  TensorStore store;
  Tensor& f = store.make<float>({3}, {2, 3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  Args args;
  args.tensor(f).real(0.5).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::pow.Tensor_Scalar_out", args)));
  const auto got = values_of<float>(out);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], std::sqrt(static_cast<float>(i + 2)));

  Tensor& ints = store.make<int64_t>({3}, {2, -3, 5});
  Tensor& int_out = store.make_empty(ScalarType::kLong, {3});
  Args cube;
  cube.tensor(ints).integer(3).tensor(int_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::pow.Tensor_Scalar_out", cube)));
  EXPECT_EQ(values_of<int64_t>(int_out), (std::vector<int64_t>{8, -27, 125}));

  Args negative;
  negative.tensor(ints).integer(-1).tensor(int_out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::pow.Tensor_Scalar_out", negative), {"negative"}));
}

TEST(KernelBinary, BadShapesAndOutputsAreReported) {
  TensorStore store;
  Tensor& a = store.make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& b = store.make<float>({4}, {1, 2, 3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  EXPECT_TRUE(fails_with(run_binary("aten::add.out", a, b, 1, out), {"aten::add.out", "broadcast", "[2, 3]", "[4]"}));

  // A static out of a different shape cannot be resized.
  Tensor& c = store.make<float>({3}, {1, 2, 3});
  Tensor& static_out = store.make_empty(ScalarType::kFloat, {4});
  EXPECT_TRUE(fails_with(run_binary("aten::add.out", c, c, 1, static_out), {"aten::add.out", "out", "[3]"}));

  // A bounded out takes the smaller shape.
  TensorOptions bound;
  bound.dynamism = ShapeDynamism::kBound;
  Tensor& dynamic_out = store.make_empty(ScalarType::kFloat, {8}, bound);
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", c, c, 1, dynamic_out)));
  EXPECT_EQ(shape_of(dynamic_out), (std::vector<int64_t>{3}));
  EXPECT_EQ(values_of<float>(dynamic_out), (std::vector<float>{2, 4, 6}));

  // Kind errors name the argument.
  Args kinds;
  kinds.tensor(c).integer(3).integer(1).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::add.out", kinds), {"argument 1 (other)", "Tensor", "Int"}));

  // A call of the wrong arity is refused as the executor refuses it; called
  // anyway, the kernel reports the missing arguments instead of reading them.
  Args short_args;
  short_args.tensor(c).tensor(c);
  EXPECT_TRUE(fails_with(run_kernel("aten::add.out", short_args), {"aten::add.out", "takes 5 arguments"}));
  EXPECT_TRUE(
      fails_with(call_kernel_fn("aten::add.out", short_args), {"aten::add.out", "argument 2 (alpha) is missing"}));

  // Unsupported dtypes are named.
  Tensor& wide = store.make_empty(ScalarType::kUInt16, {3});
  Args uint16;
  uint16.tensor(wide).tensor(wide).integer(1).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::add.out", uint16), {"uint16"}));
}

TEST(KernelBinary, MissingDataIsAnErrorNotACrash) {
  TensorStore store;
  Tensor& a = store.make<float>({3}, {1, 2, 3});
  Tensor& no_data = store.make_empty(ScalarType::kFloat, {3});
  no_data.set_data(nullptr, 0);
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  EXPECT_TRUE(fails_with(run_binary("aten::add.out", a, no_data, 1, out), {"other", "no data"}));

  TensorOptions small;
  small.capacity_elements = 2;
  Tensor& short_out = store.make_empty(ScalarType::kFloat, {3}, small);
  EXPECT_TRUE(fails_with(run_binary("aten::add.out", a, a, 1, short_out), {"out", "bytes"}));
}

TEST(KernelBinary, NonContiguousInputsAreReadThroughStrides) {
  TensorStore store;
  // A 2x3 tensor stored channels-last style: dim order [1, 0], so memory is
  // column-major: logical [[1, 2, 3], [4, 5, 6]] is stored 1, 4, 2, 5, 3, 6.
  TensorOptions column_major;
  column_major.dim_order = {1, 0};
  Tensor& a = store.make<float>({2, 3}, {1, 4, 2, 5, 3, 6}, column_major);
  Tensor& b = store.make<float>({2, 3}, {10, 20, 30, 40, 50, 60});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3});
  ASSERT_TRUE(is_ok(run_binary("aten::add.out", a, b, 1, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{11, 22, 33, 44, 55, 66}));
}

// --- logical, bitwise, maximum, minimum -----------------------------------------------

TEST(KernelBinary, LogicalOperatorsUseTruthOfEachOperandWithBroadcasting) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& a = store.make<float>({2, 3}, {0, 1.5f, nan, 0, -2, 0});
  Tensor& b = store.make<int32_t>({3}, {0, 0, 7});
  const std::vector<bool> truth_a = {false, true, true, false, true, false};
  const std::vector<bool> truth_b = {false, false, true};
  struct Case {
    const char* key;
    bool (*f)(bool, bool);
  };
  const Case cases[] = {{"aten::logical_and.out", [](bool x, bool y) { return x && y; }},
                        {"aten::logical_or.out", [](bool x, bool y) { return x || y; }},
                        {"aten::logical_xor.out", [](bool x, bool y) { return x != y; }}};
  for (const Case& c : cases) {
    Tensor& out = store.make_empty(ScalarType::kBool, {2, 3});
    Args args;
    args.tensor(a).tensor(b).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel(c.key, args))) << c.key;
    const auto got = values_of<bool>(out);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i], c.f(truth_a[i], truth_b[i % 3])) << c.key << " " << i;
    // Any out dtype takes 0 and 1.
    Tensor& float_out = store.make_empty(ScalarType::kFloat, {2, 3});
    Args float_args;
    float_args.tensor(a).tensor(b).tensor(float_out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel(c.key, float_args)));
    const auto as_float = values_of<float>(float_out);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(as_float[i], got[i] ? 1.0f : 0.0f);
  }
  Tensor& wrong = store.make<float>({2}, {1, 2});
  Tensor& out = store.make_empty(ScalarType::kBool, {2, 3});
  EXPECT_TRUE(fails_with(run_binary("aten::logical_and.out", a, wrong, out), {"aten::logical_and.out", "broadcast"}));
}

TEST(KernelBinary, BitwiseOperatorsOnIntegersBoolsAndScalars) {
  TensorStore store;
  Tensor& a = store.make<int32_t>({4}, {12, -1, 5, 0x7F});
  Tensor& b = store.make<int32_t>({4}, {10, 6, -8, 0x100});
  Tensor& out = store.make_empty(ScalarType::kInt, {4});
  auto run = [&](const char* key, Tensor& x, Tensor& y, Tensor& o) {
    Args args;
    args.tensor(x).tensor(y).tensor(o).same_as(2);
    return run_kernel(key, args);
  };
  ASSERT_TRUE(is_ok(run("aten::bitwise_and.Tensor_out", a, b, out)));
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{12 & 10, -1 & 6, 5 & -8, 0x7F & 0x100}));
  ASSERT_TRUE(is_ok(run("aten::bitwise_or.Tensor_out", a, b, out)));
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{12 | 10, -1 | 6, 5 | -8, 0x7F | 0x100}));
  ASSERT_TRUE(is_ok(run("aten::bitwise_xor.Tensor_out", a, b, out)));
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{12 ^ 10, -1 ^ 6, 5 ^ -8, 0x7F ^ 0x100}));
  // Bools stay bools.
  Tensor& p = store.make<bool>({4}, {true, true, false, false});
  Tensor& q = store.make<bool>({4}, {true, false, true, false});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {4});
  ASSERT_TRUE(is_ok(run("aten::bitwise_xor.Tensor_out", p, q, bool_out)));
  EXPECT_EQ(values_of<bool>(bool_out), (std::vector<bool>{false, true, true, false}));
  // int8 with a Scalar keeps int8 (the Scalar only matters by category).
  Tensor& bytes = store.make<int8_t>({3}, {-128, 127, 0x0F});
  Tensor& byte_out = store.make_empty(ScalarType::kChar, {3});
  Args scalar_args;
  scalar_args.tensor(bytes).integer(0x3C).tensor(byte_out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::bitwise_or.Scalar_out", scalar_args)));
  EXPECT_EQ(values_of<int8_t>(byte_out), (std::vector<int8_t>{int8_t(-128 | 0x3C), 127, 0x3F}));
  // Floating operands are refused.
  Tensor& floats = store.make<float>({4}, {1, 2, 3, 4});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {4});
  EXPECT_TRUE(fails_with(run("aten::bitwise_and.Tensor_out", a, floats, float_out),
                         {"aten::bitwise_and.Tensor_out", "integer or bool"}));
  Args double_scalar;
  double_scalar.tensor(a).real(1.5).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::bitwise_and.Scalar_out", double_scalar), {"integer or bool"}));
}

TEST(KernelBinary, BitwiseNotFlipsBitsOrNegatesBools) {
  TensorStore store;
  Tensor& ints = store.make<int64_t>({3}, {0, -1, 5});
  Tensor& out = store.make_empty(ScalarType::kLong, {3});
  Args args;
  args.tensor(ints).tensor(out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::bitwise_not.out", args)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{-1, 0, -6}));
  Tensor& bytes = store.make<uint8_t>({2}, {0, 0xF0});
  Tensor& byte_out = store.make_empty(ScalarType::kByte, {2});
  Args byte_args;
  byte_args.tensor(bytes).tensor(byte_out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::bitwise_not.out", byte_args)));
  EXPECT_EQ(values_of<uint8_t>(byte_out), (std::vector<uint8_t>{0xFF, 0x0F}));
  Tensor& bools = store.make<bool>({2}, {true, false});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {2});
  Args bool_args;
  bool_args.tensor(bools).tensor(bool_out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::bitwise_not.out", bool_args)));
  EXPECT_EQ(values_of<bool>(bool_out), (std::vector<bool>{false, true}));
  Tensor& floats = store.make<float>({2}, {1, 2});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {2});
  Args float_args;
  float_args.tensor(floats).tensor(float_out).same_as(1);
  EXPECT_TRUE(fails_with(run_kernel("aten::bitwise_not.out", float_args), {"aten::bitwise_not.out", "float32"}));
}

TEST(KernelBinary, MaximumAndMinimumPromoteBroadcastAndPropagateNaN) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& a = store.make<float>({2, 2}, {1, nan, -3, 4});
  Tensor& b = store.make<int64_t>({2}, {2, 0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 2});
  ASSERT_TRUE(is_ok(run_binary("aten::maximum.out", a, b, out)));
  auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 2);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 2);
  EXPECT_EQ(got[3], 4);
  ASSERT_TRUE(is_ok(run_binary("aten::minimum.out", a, b, out)));
  got = values_of<float>(out);
  EXPECT_EQ(got[0], 1);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], -3);
  EXPECT_EQ(got[3], 0);
  // A float result cannot go into an integer out.
  Tensor& int_out = store.make_empty(ScalarType::kLong, {2, 2});
  EXPECT_TRUE(fails_with(run_binary("aten::maximum.out", a, b, int_out), {"aten::maximum.out", "out"}));
  Tensor& i = store.make<int16_t>({3}, {-5, 7, 0});
  Tensor& j = store.make<int16_t>({3}, {3, 7, -1});
  Tensor& short_out = store.make_empty(ScalarType::kShort, {3});
  ASSERT_TRUE(is_ok(run_binary("aten::minimum.out", i, j, short_out)));
  EXPECT_EQ(values_of<int16_t>(short_out), (std::vector<int16_t>{-5, 7, -1}));
}

}  // namespace
}  // namespace etna::kernel_test
