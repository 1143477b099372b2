#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

TEST(KernelOnnxSupport, FloorCeilRoundOnFloats) {
  TensorStore store;
  Tensor& self = store.make<float>({8}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.7f, -2.2f});
  Tensor& out = store.make_empty(ScalarType::kFloat, {8});
  ASSERT_TRUE(is_ok(run_unary("aten::floor.out", self, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-3, -2, -1, 0, 1, 2, 2, -3}));
  ASSERT_TRUE(is_ok(run_unary("aten::ceil.out", self, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-2, -1, -0.0f, 1, 2, 3, 3, -2}));
  ASSERT_TRUE(is_ok(run_unary("aten::round.out", self, out)));
  // Halves round to even.
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-2, -2, -0.0f, 0, 2, 2, 3, -2}));
  EXPECT_TRUE(std::signbit(values_of<float>(out)[2]));
}

TEST(KernelOnnxSupport, RoundKeepsTheSignOfZeroAndPassesNanAndInfinity) {
  TensorStore store;
  const float inf = std::numeric_limits<float>::infinity();
  Tensor& self = store.make<float>({6}, {-0.3f, -0.0f, 0.4f, inf, -inf, std::numeric_limits<float>::quiet_NaN()});
  Tensor& out = store.make_empty(ScalarType::kFloat, {6});
  ASSERT_TRUE(is_ok(run_unary("aten::round.out", self, out)));
  const auto got = values_of<float>(out);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_TRUE(std::signbit(got[0]));
  EXPECT_TRUE(std::signbit(got[1]));
  EXPECT_FALSE(std::signbit(got[2]));
  EXPECT_EQ(got[3], inf);
  EXPECT_EQ(got[4], -inf);
  EXPECT_TRUE(std::isnan(got[5]));
}

TEST(KernelOnnxSupport, RoundingKeepsIntegersAndRejectsBool) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({3}, {-7, 0, 9});
  Tensor& out = store.make_empty(ScalarType::kLong, {3});
  ASSERT_TRUE(is_ok(run_unary("aten::floor.out", self, out)));
  EXPECT_EQ(values_of<int64_t>(out), (std::vector<int64_t>{-7, 0, 9}));
  Tensor& flags = store.make<bool>({2}, {true, false});
  Tensor& flags_out = store.make_empty(ScalarType::kBool, {2});
  EXPECT_TRUE(fails_with(run_unary("aten::round.out", flags, flags_out), {"aten::round.out", "bool"}));
}

TEST(KernelOnnxSupport, ErfMatchesTheStandardLibrary) {
  TensorStore store;
  const std::vector<double> xs = {-3, -1, -0.25, 0, 0.25, 1, 3};
  Tensor& self = store.make<double>({7}, xs);
  Tensor& out = store.make_empty(ScalarType::kDouble, {7});
  ASSERT_TRUE(is_ok(run_unary("aten::erf.out", self, out)));
  const auto got = values_of<double>(out);
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_DOUBLE_EQ(got[i], std::erf(xs[i]));
  Tensor& ints = store.make<int64_t>({2}, {0, 1});
  Tensor& float_out = store.make_empty(ScalarType::kFloat, {2});
  ASSERT_TRUE(is_ok(run_unary("aten::erf.out", ints, float_out)));
  EXPECT_FLOAT_EQ(values_of<float>(float_out)[1], static_cast<float>(std::erf(1.0)));
}

}  // namespace
}  // namespace etna::kernel_test
