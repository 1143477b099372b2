#include <cmath>
#include <functional>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelUnary, FloatFunctionsMatchTheStandardLibrary) {
  struct Case {
    const char* key;
    std::function<double(double)> reference;
    float lo, hi;
  };
  const std::vector<Case> cases = {
      {"aten::exp.out", [](double x) { return std::exp(x); }, -5, 5},
      {"aten::log.out", [](double x) { return std::log(x); }, 0.01f, 10},
      {"aten::sqrt.out", [](double x) { return std::sqrt(x); }, 0, 10},
      {"aten::rsqrt.out", [](double x) { return 1 / std::sqrt(x); }, 0.01f, 10},
      {"aten::sin.out", [](double x) { return std::sin(x); }, -7, 7},
      {"aten::cos.out", [](double x) { return std::cos(x); }, -7, 7},
      {"aten::tanh.out", [](double x) { return std::tanh(x); }, -5, 5},
      {"aten::sigmoid.out", [](double x) { return 1 / (1 + std::exp(-x)); }, -10, 10},
      {"aten::silu.out", [](double x) { return x / (1 + std::exp(-x)); }, -10, 10},
      {"aten::hardswish.out", [](double x) { return x <= -3  ? 0.0
                                                    : x >= 3 ? x
                                                             : x * (x + 3) / 6; }, -5, 5},
  };
  Lcg rng(11);
  for (const Case& c : cases) {
    TensorStore store;
    const auto values = rng.floats(64, c.lo, c.hi);
    Tensor& self = store.make<float>({8, 8}, values);
    Tensor& out = store.make_empty(ScalarType::kFloat, {8, 8});
    ASSERT_TRUE(is_ok(run_unary(c.key, self, out))) << c.key;
    const auto got = values_of<float>(out);
    for (size_t i = 0; i < values.size(); ++i) {
      const double expected = c.reference(values[i]);
      EXPECT_NEAR(got[i], expected, 1e-5 * std::max(1.0, std::fabs(expected))) << c.key << " x=" << values[i];
    }
  }
}

TEST(KernelUnary, DoubleInputComputesInDouble) {
  TensorStore store;
  Tensor& self = store.make<double>({2}, {1.0, 1e-10});
  Tensor& out = store.make_empty(ScalarType::kDouble, {2});
  ASSERT_TRUE(is_ok(run_unary("aten::exp.out", self, out)));
  const auto got = values_of<double>(out);
  EXPECT_DOUBLE_EQ(got[0], std::exp(1.0));
  EXPECT_DOUBLE_EQ(got[1], std::exp(1e-10));
}

TEST(KernelUnary, IntegerInputGivesFloatAndIntOutIsRejected) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({3}, {0, 1, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  ASSERT_TRUE(is_ok(run_unary("aten::sqrt.out", self, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 1, 2}));
  Tensor& int_out = store.make_empty(ScalarType::kLong, {3});
  EXPECT_TRUE(fails_with(run_unary("aten::sqrt.out", self, int_out), {"aten::sqrt.out", "float32", "int64"}));
}

TEST(KernelUnary, GeluExactAndTanh) {
  TensorStore store;
  const std::vector<float> xs = {-3, -1, -0.5f, 0, 0.5f, 1, 3};
  Tensor& self = store.make<float>({7}, xs);
  Tensor& out = store.make_empty(ScalarType::kFloat, {7});
  for (const char* mode : {"none", "tanh"}) {
    Args args;
    args.tensor(self).string(mode).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::gelu.out", args))) << mode;
    const auto got = values_of<float>(out);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i];
      const double expected = std::string(mode) == "none"
                                  ? 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))
                                  : 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
      EXPECT_NEAR(got[i], expected, 1e-6) << mode << " x=" << x;
    }
  }
  Args bad;
  bad.tensor(self).string("erf").tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::gelu.out", bad), {"aten::gelu.out", "approximate", "erf"}));
}

TEST(KernelUnary, NegReluAbsKeepDtype) {
  TensorStore store;
  Tensor& ints = store.make<int32_t>({4}, {-2, 0, 3, std::numeric_limits<int32_t>::min()});
  Tensor& int_out = store.make_empty(ScalarType::kInt, {4});
  ASSERT_TRUE(is_ok(run_unary("aten::neg.out", ints, int_out)));
  EXPECT_EQ(values_of<int32_t>(int_out), (std::vector<int32_t>{2, 0, -3, std::numeric_limits<int32_t>::min()}));
  ASSERT_TRUE(is_ok(run_unary("aten::relu.out", ints, int_out)));
  EXPECT_EQ(values_of<int32_t>(int_out), (std::vector<int32_t>{0, 0, 3, 0}));
  ASSERT_TRUE(is_ok(run_unary("aten::abs.out", ints, int_out)));
  EXPECT_EQ(values_of<int32_t>(int_out)[0], 2);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& floats = store.make<float>({3}, {-1.5f, nan, 2.0f});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {3});
  ASSERT_TRUE(is_ok(run_unary("aten::relu.out", floats, float_out)));
  const auto got = values_of<float>(float_out);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 2.0f);

  Tensor& flags = store.make<bool>({2}, {true, false});
  Tensor& flag_out = store.make_empty(ScalarType::kBool, {2});
  EXPECT_TRUE(fails_with(run_unary("aten::neg.out", flags, flag_out), {"aten::neg.out", "bool"}));
}

TEST(KernelUnary, LogicalNotOfAnyDtype) {
  TensorStore store;
  Tensor& self = store.make<float>({4}, {0, 1.5f, -2, 0});
  Tensor& out = store.make_empty(ScalarType::kBool, {4});
  ASSERT_TRUE(is_ok(run_unary("aten::logical_not.out", self, out)));
  EXPECT_EQ(values_of<bool>(out), (std::vector<bool>{true, false, false, true}));
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {4});
  ASSERT_TRUE(is_ok(run_unary("aten::logical_not.out", self, float_out)));
  EXPECT_EQ(values_of<float>(float_out), (std::vector<float>{1, 0, 0, 1}));
}

TEST(KernelUnary, HardtanhAndClamp) {
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& self = store.make<float>({5}, {-3, -0.5f, 0.25f, 2, nan});
  Tensor& out = store.make_empty(ScalarType::kFloat, {5});
  {
    Args args;
    args.tensor(self).integer(-1).integer(1).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::hardtanh.out", args)));
    const auto got = values_of<float>(out);
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 4), (std::vector<float>{-1, -0.5f, 0.25f, 1}));
    EXPECT_TRUE(std::isnan(got[4]));
  }
  {
    Args args;
    args.tensor(self).none().real(0.5).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::clamp.out", args)));
    const auto got = values_of<float>(out);
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 4), (std::vector<float>{-3, -0.5f, 0.25f, 0.5f}));
    EXPECT_TRUE(std::isnan(got[4]));
  }
  {
    Args args;
    args.tensor(self).none().none().tensor(out).same_as(3);
    EXPECT_TRUE(fails_with(run_kernel("aten::clamp.out", args), {"aten::clamp.out", "min", "max"}));
  }
  // Integer clamp with integer bounds keeps integers.
  Tensor& ints = store.make<int64_t>({4}, {-10, 0, 5, 100});
  Tensor& int_out = store.make_empty(ScalarType::kLong, {4});
  Args int_args;
  int_args.tensor(ints).integer(-1).integer(10).tensor(int_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::clamp.out", int_args)));
  EXPECT_EQ(values_of<int64_t>(int_out), (std::vector<int64_t>{-1, 0, 5, 10}));
}

TEST(KernelUnary, LeakyRelu) {
  TensorStore store;
  Tensor& self = store.make<float>({3}, {-2, 0, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3});
  Args args;
  args.tensor(self).real(0.1).tensor(out).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::leaky_relu.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-0.2f, 0, 3}));
}

TEST(KernelUnary, OutShapeMismatchIsReported) {
  TensorStore store;
  Tensor& self = store.make<float>({2, 2}, {1, 2, 3, 4});
  Tensor& out = store.make_empty(ScalarType::kFloat, {4});
  EXPECT_TRUE(fails_with(run_unary("aten::tanh.out", self, out), {"aten::tanh.out", "out", "rank"}));
}

}  // namespace
}  // namespace etna::kernel_test
