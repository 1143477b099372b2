// llama::fast_hadamard_transform against a double-precision formulation of
// the same matrix: Sylvester's Hadamard matrix (entry (i, j) is -1 to the
// number of bits i and j share) over 1 / sqrt(n), and for 28 * 2^k the
// Kronecker product with the 28 x 28 matrix, read back from the kernel and
// checked to be a Hadamard matrix.

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_support.h"
#include "kernels/real_elements.h"

namespace etna::kernel_test {
namespace {

Status run_hadamard(Tensor& mat, Tensor& out) { return run_unary("llama::fast_hadamard_transform.out", mat, out); }

double sylvester(int64_t i, int64_t j) {
  return (__builtin_popcountll(static_cast<unsigned long long>(i & j)) % 2) ? -1.0 : 1.0;
}

// The kernel's 28 x 28 matrix: the transform of each unit vector of width 28
// (2^0 columns, so no normalization) is a column of it.
std::vector<std::vector<double>> hadamard_28() {
  std::vector<std::vector<double>> h(28, std::vector<double>(28));
  for (int j = 0; j < 28; ++j) {
    TensorStore store;
    std::vector<double> unit(28, 0.0);
    unit[static_cast<size_t>(j)] = 1.0;
    Tensor& mat = store.make<double>({28}, unit);
    Tensor& out = store.make_empty(ScalarType::kDouble, {28});
    EXPECT_TRUE(is_ok(run_hadamard(mat, out)));
    const auto column = values_of<double>(out);
    for (int i = 0; i < 28; ++i) h[static_cast<size_t>(i)][static_cast<size_t>(j)] = column[static_cast<size_t>(i)];
  }
  return h;
}

// Rows of `width` transformed in double: width 2^k, or 28 * 2^k as 28 blocks
// of 2^k (H28 kron Sylvester(2^k) / sqrt(2^k)).
std::vector<double> reference(const std::vector<double>& x, int64_t width) {
  static const auto h28 = hadamard_28();
  const bool times_28 = width % 28 == 0;
  const int64_t power = times_28 ? width / 28 : width;
  const int64_t blocks = times_28 ? 28 : 1;
  const double norm = 1.0 / std::sqrt(static_cast<double>(power));
  std::vector<double> y(x.size(), 0.0);
  for (size_t row = 0; row < x.size() / static_cast<size_t>(width); ++row) {
    const double* in = x.data() + row * width;
    double* out = y.data() + row * width;
    for (int64_t a = 0; a < blocks; ++a) {
      for (int64_t b = 0; b < power; ++b) {
        double sum = 0;
        for (int64_t a2 = 0; a2 < blocks; ++a2) {
          const double outer = times_28 ? h28[static_cast<size_t>(a)][static_cast<size_t>(a2)] : 1.0;
          for (int64_t b2 = 0; b2 < power; ++b2) sum += outer * sylvester(b, b2) * in[a2 * power + b2];
        }
        out[a * power + b] = sum * norm;
      }
    }
  }
  return y;
}

std::vector<double> widen(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

TEST(FastHadamardTransform, TwentyEightMatrixIsHadamard) {
  const auto h = hadamard_28();
  for (size_t i = 0; i < 28; ++i) {
    for (size_t j = 0; j < 28; ++j) {
      ASSERT_TRUE(h[i][j] == 1.0 || h[i][j] == -1.0) << i << ", " << j;
      double dot = 0;
      for (size_t k = 0; k < 28; ++k) dot += h[i][k] * h[j][k];
      ASSERT_EQ(dot, i == j ? 28.0 : 0.0) << "rows " << i << " and " << j;
    }
  }
  // The first row of Williamson's matrix as SpinQuant writes it: +------++----++-+--+-+--++--
  const std::vector<double> first = {1, -1, -1, -1, -1, -1, -1, 1, 1,  -1, -1, -1, -1, 1,
                                     1, -1, 1,  -1, -1, 1,  -1, 1, -1, -1, 1,  1,  -1, -1};
  EXPECT_EQ(h[0], first);
}

class FastHadamardWidths : public ::testing::TestWithParam<int64_t> {};

TEST_P(FastHadamardWidths, Float32MatchesDoubleReferenceOnEveryRow) {
  const int64_t width = GetParam();
  Lcg rng(static_cast<uint64_t>(width) * 7 + 1);
  TensorStore store;
  const int64_t rows = 3;
  const auto x = rng.floats(static_cast<size_t>(rows * width));
  Tensor& mat = store.make<float>({1, rows, width}, x);
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, rows, width});
  ASSERT_TRUE(is_ok(run_hadamard(mat, out)));
  const auto expected = reference(widen(x), width);
  const auto got = values_of<float>(out);
  // log2(n) rounded additions each of about |row| / sqrt(n) * 2^-24, and the 28 sums for 28 * 2^k.
  const double tolerance = 2e-6 * std::log2(static_cast<double>(width) + 1) * (width % 28 == 0 ? 8 : 1);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], tolerance) << "element " << i;
}

TEST_P(FastHadamardWidths, Float64MatchesReferenceClosely) {
  const int64_t width = GetParam();
  Lcg rng(static_cast<uint64_t>(width) + 99);
  TensorStore store;
  const auto x = widen(rng.floats(static_cast<size_t>(2 * width)));
  Tensor& mat = store.make<double>({2, width}, x);
  Tensor& out = store.make_empty(ScalarType::kDouble, {2, width});
  ASSERT_TRUE(is_ok(run_hadamard(mat, out)));
  const auto expected = reference(x, width);
  const auto got = values_of<double>(out);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-12) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(PowersOfTwoAndTwentyEightTimes, FastHadamardWidths,
                         ::testing::Values(1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 28, 56, 112, 448));

// A power of two is its own inverse (normalized Sylvester matrices are
// symmetric and orthogonal). The 28 x 28 factor is orthogonal but not
// symmetric, so a 28 * 2^k transform keeps norms, times sqrt(28).
TEST(FastHadamardTransform, PowerOfTwoIsItsOwnInverseAndTwentyEightTimesKeepsNorms) {
  for (int64_t width : {64, 112}) {
    Lcg rng(3);
    TensorStore store;
    const auto x = rng.floats(static_cast<size_t>(width));
    Tensor& mat = store.make<float>({width}, x);
    Tensor& once = store.make_empty(ScalarType::kFloat, {width});
    Tensor& twice = store.make_empty(ScalarType::kFloat, {width});
    ASSERT_TRUE(is_ok(run_hadamard(mat, once)));
    ASSERT_TRUE(is_ok(run_hadamard(once, twice)));
    double in_norm = 0, out_norm = 0;
    const auto y = values_of<float>(once);
    for (size_t i = 0; i < x.size(); ++i) {
      in_norm += double(x[i]) * x[i];
      out_norm += double(y[i]) * y[i];
    }
    const double gain = width % 28 == 0 ? 28.0 : 1.0;
    EXPECT_NEAR(out_norm, gain * in_norm, 1e-5 * gain * in_norm) << width;
    if (gain != 1.0) continue;
    const auto back = values_of<float>(twice);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(back[i], x[i], 1e-5) << width << ": element " << i;
  }
}

// float16 rounds every operation as ExecuTorch's Half does. [1, 1]: the sum 2
// is exact; 1 / sqrt(2) is 1 / (sqrt(2) rounded to 1.4140625), rounded to
// 0.70703125; 2 times that is 1.4140625, where float32 gives 1.41421354.
TEST(FastHadamardTransform, Float16RoundsEachOperation) {
  TensorStore store;
  Tensor& mat = store.make_empty(ScalarType::kHalf, {2});
  auto* bits = static_cast<uint16_t*>(mat.data());
  bits[0] = bits[1] = kernels::float_to_half(1.0f);
  Tensor& out = store.make_empty(ScalarType::kHalf, {2});
  ASSERT_TRUE(is_ok(run_hadamard(mat, out)));
  const auto got = values_of<uint16_t>(out);
  EXPECT_EQ(kernels::half_to_float(got[0]), 1.4140625f);
  EXPECT_EQ(kernels::half_to_float(got[1]), 0.0f);

  // Wider rows stay within float16's precision of the reference.
  Lcg rng(8);
  const auto x = rng.floats(3 * 56);
  Tensor& wide = store.make_empty(ScalarType::kHalf, {3, 56});
  std::vector<double> rounded;
  for (size_t i = 0; i < x.size(); ++i) {
    static_cast<uint16_t*>(wide.data())[i] = kernels::float_to_half(x[i]);
    rounded.push_back(kernels::half_to_float(kernels::float_to_half(x[i])));
  }
  Tensor& wide_out = store.make_empty(ScalarType::kHalf, {3, 56});
  ASSERT_TRUE(is_ok(run_hadamard(wide, wide_out)));
  const auto expected = reference(rounded, 56);
  const auto wide_bits = values_of<uint16_t>(wide_out);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(kernels::half_to_float(wide_bits[i]), expected[i], 0.1) << "element " << i;
  }
}

// bfloat16 rounds every operation to bfloat16, as float16 rounds to float16.
// [1, 1]: sqrt(2) rounds to 1.4140625 and 1 / that to 0.70703125 in
// bfloat16 too, so the result is the float16 one; [3, 1]: 4 / 1.4140625 =
// 2.8287... rounds to 2.828125 (float32: 2.82842708).
TEST(FastHadamardTransform, BFloat16RoundsEachOperation) {
  TensorStore store;
  Tensor& mat = store.make_empty(ScalarType::kBFloat16, {2, 2});
  auto* bits = static_cast<uint16_t*>(mat.data());
  const float values[] = {1.0f, 1.0f, 3.0f, 1.0f};
  for (int i = 0; i < 4; ++i) bits[i] = float_to_bfloat16(values[i]);
  Tensor& out = store.make_empty(ScalarType::kBFloat16, {2, 2});
  ASSERT_TRUE(is_ok(run_hadamard(mat, out)));
  const auto got = values_of<uint16_t>(out);
  EXPECT_EQ(bfloat16_to_float(got[0]), 1.4140625f);
  EXPECT_EQ(bfloat16_to_float(got[1]), 0.0f);
  EXPECT_EQ(bfloat16_to_float(got[2]), 2.828125f);
  EXPECT_EQ(bfloat16_to_float(got[3]), 1.4140625f);

  // Wider rows stay within bfloat16's precision of the reference; NaN and infinities pass through as float's do.
  Lcg rng(9);
  auto x = rng.floats(3 * 56);
  Tensor& wide = store.make_empty(ScalarType::kBFloat16, {3, 56});
  std::vector<double> rounded;
  for (size_t i = 0; i < x.size(); ++i) {
    static_cast<uint16_t*>(wide.data())[i] = float_to_bfloat16(x[i]);
    rounded.push_back(bfloat16_to_float(float_to_bfloat16(x[i])));
  }
  Tensor& wide_out = store.make_empty(ScalarType::kBFloat16, {3, 56});
  ASSERT_TRUE(is_ok(run_hadamard(wide, wide_out)));
  const auto expected = reference(rounded, 56);
  const auto wide_bits = values_of<uint16_t>(wide_out);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(bfloat16_to_float(wide_bits[i]), expected[i], 0.25) << "element " << i;
  }
  Tensor& special = store.make_empty(ScalarType::kBFloat16, {4});
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), 1.0f, 2.0f, 3.0f};
  for (int i = 0; i < 4; ++i) static_cast<uint16_t*>(special.data())[i] = float_to_bfloat16(specials[i]);
  Tensor& special_out = store.make_empty(ScalarType::kBFloat16, {4});
  ASSERT_TRUE(is_ok(run_hadamard(special, special_out)));
  for (uint16_t b : values_of<uint16_t>(special_out)) EXPECT_TRUE(std::isnan(bfloat16_to_float(b)));
}

// A bounded out takes each call's shape: the transform follows the rows given.
TEST(FastHadamardTransform, DynamicRowsResizeOut) {
  TensorStore store;
  Tensor& out = store.make_empty(ScalarType::kFloat, {8, 16}, bounded());
  for (int64_t rows : {8, 1, 5}) {
    Lcg rng(static_cast<uint64_t>(rows));
    const auto x = rng.floats(static_cast<size_t>(rows * 16));
    Tensor& mat = store.make<float>({rows, 16}, x);
    ASSERT_TRUE(is_ok(run_hadamard(mat, out)));
    EXPECT_EQ(shape_of(out), (std::vector<int64_t>{rows, 16}));
    const auto expected = reference(widen(x), 16);
    const auto got = values_of<float>(out);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-5) << rows << " rows: element " << i;
  }
}

TEST(FastHadamardTransform, EmptyAndScalarInputs) {
  TensorStore store;
  Tensor& empty = store.make_empty(ScalarType::kFloat, {0, 12});
  Tensor& empty_out = store.make_empty(ScalarType::kFloat, {0, 12});
  EXPECT_TRUE(is_ok(run_hadamard(empty, empty_out)));  // no rows: nothing to check or transform
  Tensor& scalar = store.make<float>({}, std::vector<float>{-2.5f});
  Tensor& scalar_out = store.make_empty(ScalarType::kFloat, {});
  ASSERT_TRUE(is_ok(run_hadamard(scalar, scalar_out)));
  EXPECT_EQ(values_of<float>(scalar_out), std::vector<float>{-2.5f});
}

TEST(FastHadamardTransform, RefusesOtherWidthsAndDtypesWithoutWriting) {
  for (int64_t width : {3, 12, 24, 84, 100}) {
    TensorStore store;
    Tensor& mat = store.make<float>({2, width}, std::vector<float>(static_cast<size_t>(2 * width), 1.0f));
    Tensor& out = store.make<float>({2, width}, std::vector<float>(static_cast<size_t>(2 * width), 7.0f));
    const Status status = run_hadamard(mat, out);
    ASSERT_FALSE(status.is_ok()) << width;
    EXPECT_EQ(status.error().code, ErrorCode::kInvalidInput) << width;
    EXPECT_TRUE(fails_with(status, {"power of 2 or 28 times one", std::to_string(width)}));
    for (float v : values_of<float>(out)) ASSERT_EQ(v, 7.0f) << width << ": out was written";
  }
  TensorStore store;
  Tensor& ints = store.make<int32_t>({4}, {1, 2, 3, 4});
  Tensor& int_out = store.make_empty(ScalarType::kInt, {4});
  const Status int_status = run_hadamard(ints, int_out);
  ASSERT_FALSE(int_status.is_ok());
  EXPECT_EQ(int_status.error().code, ErrorCode::kInvalidProgram);
  Tensor& bools = store.make_empty(ScalarType::kBool, {4});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {4});
  EXPECT_TRUE(fails_with(run_hadamard(bools, bool_out), {"float32, float64, float16 or bfloat16"}));
  Tensor& floats = store.make<float>({4}, {1, 2, 3, 4});
  Tensor& double_out = store.make_empty(ScalarType::kDouble, {4});
  EXPECT_TRUE(fails_with(run_hadamard(floats, double_out), {"out"}));
}

}  // namespace
}  // namespace etna::kernel_test
