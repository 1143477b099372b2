// float16 and bfloat16 through the portable kernels: each result is the
// float formula rounded once (to nearest, ties to even) into the output
// dtype; promotion follows PyTorch; unsupported combinations stay errors.

#include <cmath>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "kernel_test_support.h"
#include "kernels/real_elements.h"

namespace etna::kernel_test {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

uint16_t round_bits(ScalarType dtype, float value) {
  return dtype == ScalarType::kHalf ? kernels::float_to_half(value) : float_to_bfloat16(value);
}

// `value` after rounding into a 16-bit float dtype.
float rounded(ScalarType dtype, float value) {
  const uint16_t bits = round_bits(dtype, value);
  return dtype == ScalarType::kHalf ? kernels::half_to_float(bits) : bfloat16_to_float(bits);
}

// A 16-bit float tensor holding `values` rounded into its dtype.
Tensor& make_16bit(TensorStore& store, ScalarType dtype, std::vector<int64_t> sizes, const std::vector<float>& values) {
  Tensor& t = store.make_empty(dtype, std::move(sizes));
  EXPECT_EQ(values.size(), t.numel());
  for (size_t i = 0; i < values.size() && i < t.numel(); ++i) {
    static_cast<uint16_t*>(t.data())[i] = round_bits(dtype, values[i]);
  }
  return t;
}

std::vector<uint16_t> bits_of(const Tensor& t) { return values_of<uint16_t>(t); }

std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> out;
  for (uint16_t bits : bits_of(t)) {
    out.push_back(t.dtype() == ScalarType::kHalf ? kernels::half_to_float(bits) : bfloat16_to_float(bits));
  }
  return out;
}

// Equal as floats, NaN matching NaN.
::testing::AssertionResult same_floats(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(expected[i]);
    if (!both_nan && got[i] != expected[i]) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", expected " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

const ScalarType kSixteenBit[] = {ScalarType::kHalf, ScalarType::kBFloat16};

TEST(KernelHalf, ToCopyRoundsToNearestEvenAndOverflowsToInfinity) {
  TensorStore store;
  // 1 + 2^-11 is halfway between 1 and the next float16 (1 + 2^-10): ties
  // go to the even mantissa (1). 1 + 3 * 2^-11 is halfway between
  // 1 + 2^-10 (odd) and 1 + 2^-9 (even). 65519 stays finite, 65520 rounds
  // past the largest float16 (65504) to infinity. 2^-25 is half the
  // smallest subnormal and ties to zero; 3 * 2^-25 ties up to 2 * 2^-24.
  const std::vector<float> values = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f, -1e6f,
                                     0x1p-25f,        3 * 0x1p-25f,        kNan,     -0.0f,    1.0f};
  Tensor& self = store.make<float>({10}, values);
  Tensor& out = store.make_empty(ScalarType::kHalf, {10});
  Args args;
  args.tensor(self).boolean(false).none().tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::_to_copy.out", args)));
  const auto bits = bits_of(out);
  const std::vector<uint16_t> expected = {0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0xFC00, 0x0000, 0x0002};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(bits[i], expected[i]) << "element " << i;
  EXPECT_EQ(bits[7] & 0x7C00, 0x7C00);  // NaN stays NaN
  EXPECT_NE(bits[7] & 0x03FF, 0);
  EXPECT_EQ(bits[8], 0x8000);  // signed zero
  EXPECT_EQ(bits[9], 0x3C00);

  // bfloat16 keeps float's range and 8 significant bits: 1 + 2^-8 ties to 1,
  // 1 + 3 * 2^-8 ties up to 1 + 2^-6; 1e38 stays finite.
  Tensor& wide = store.make<float>({4}, {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1e38f, kNan});
  Tensor& brain = store.make_empty(ScalarType::kBFloat16, {4});
  Args to_bf16;
  to_bf16.tensor(wide).boolean(false).ints({0}).tensor(brain).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("dim_order_ops::_to_dim_order_copy.out", to_bf16)));
  const auto brain_bits = bits_of(brain);
  EXPECT_EQ(brain_bits[0], 0x3F80);
  EXPECT_EQ(brain_bits[1], 0x3F82);
  EXPECT_EQ(bfloat16_to_float(brain_bits[2]), rounded(ScalarType::kBFloat16, 1e38f));
  EXPECT_TRUE(std::isfinite(bfloat16_to_float(brain_bits[2])));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(brain_bits[3])));
}

TEST(KernelHalf, CopiesConvertBetweenSixteenBitAndWiderDtypes) {
  TensorStore store;
  const std::vector<float> values = {0.1f, -2.5f, 3e-5f, 1000.7f};
  for (ScalarType dtype : kSixteenBit) {
    Tensor& self = make_16bit(store, dtype, {4}, values);
    // Widening is exact.
    Tensor& widened = store.make_empty(ScalarType::kFloat, {4});
    Args widen;
    widen.tensor(self).boolean(false).none().tensor(widened).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::_to_copy.out", widen)));
    EXPECT_TRUE(same_floats(values_of<float>(widened), floats_of(self)));

    // Between the two 16-bit formats the value rounds once, through float.
    const ScalarType other = dtype == ScalarType::kHalf ? ScalarType::kBFloat16 : ScalarType::kHalf;
    Tensor& converted = store.make_empty(other, {4});
    Args convert;
    convert.tensor(self).boolean(false).none().tensor(converted).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::_to_copy.out", convert)));
    std::vector<float> expected;
    for (float v : floats_of(self)) expected.push_back(rounded(other, v));
    EXPECT_TRUE(same_floats(floats_of(converted), expected));

    // To integers: truncated like float32 would be.
    Tensor& ints = store.make_empty(ScalarType::kInt, {4});
    Args to_int;
    to_int.tensor(self).boolean(false).none().tensor(ints).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::_to_copy.out", to_int)));
    std::vector<int32_t> truncated;
    for (float v : floats_of(self)) truncated.push_back(static_cast<int32_t>(v));
    EXPECT_EQ(values_of<int32_t>(ints), truncated);

    // clone and copy_ keep the bits.
    Tensor& cloned = store.make_empty(dtype, {4});
    Args clone;
    clone.tensor(self).none().tensor(cloned).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::clone.out", clone)));
    EXPECT_EQ(bits_of(cloned), bits_of(self));
    Tensor& target = make_16bit(store, dtype, {4}, {0, 0, 0, 0});
    Tensor& source = store.make<double>({1}, {0.3});
    Args copy;
    copy.tensor(target).tensor(source).boolean(false).same_as(0);
    ASSERT_TRUE(is_ok(run_kernel("aten::copy_", copy)));
    EXPECT_EQ(floats_of(target), std::vector<float>(4, rounded(dtype, 0.3f)));
  }
}

TEST(KernelHalf, ArithmeticComputesInFloatAndRoundsOnce) {
  TensorStore store;
  // float16: 1 + 2^-11 ties to 1; (1 + 2^-10) + 2^-11 ties up to 1 + 2^-9;
  // 65504 + 32 overflows to inf; NaN propagates.
  Tensor& a = make_16bit(store, ScalarType::kHalf, {4}, {1.0f, 1.0f + 0x1p-10f, 65504.0f, kNan});
  Tensor& b = make_16bit(store, ScalarType::kHalf, {4}, {0x1p-11f, 0x1p-11f, 32.0f, 1.0f});
  Tensor& sum = store.make_empty(ScalarType::kHalf, {4});
  Args add;
  add.tensor(a).tensor(b).integer(1).tensor(sum).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::add.out", add)));
  const auto bits = bits_of(sum);
  EXPECT_EQ(bits[0], 0x3C00);
  EXPECT_EQ(bits[1], 0x3C02);
  EXPECT_EQ(bits[2], 0x7C00);
  EXPECT_TRUE(std::isnan(kernels::half_to_float(bits[3])));

  // Every binary formula on random operands, both formats, against the
  // float formula rounded once (alpha folds into the float computation).
  Lcg rng(7);
  for (ScalarType dtype : kSixteenBit) {
    const auto x = rng.floats(16, -8.0f, 8.0f), y = rng.floats(16, 0.5f, 4.0f);
    Tensor& lhs = make_16bit(store, dtype, {4, 4}, x);
    Tensor& rhs = make_16bit(store, dtype, {4, 4}, y);
    const auto l = floats_of(lhs), r = floats_of(rhs);
    struct Case {
      const char* key;
      bool alpha;
      float (*formula)(float, float);
    };
    const Case cases[] = {
        {"aten::add.out", true, [](float p, float q) { return p + 3.0f * q; }},
        {"aten::sub.out", true, [](float p, float q) { return p - 3.0f * q; }},
        {"aten::mul.out", false, [](float p, float q) { return p * q; }},
        {"aten::div.out", false, [](float p, float q) { return p / q; }},
        {"aten::maximum.out", false, [](float p, float q) { return p > q ? p : q; }},
    };
    for (const Case& c : cases) {
      Tensor& out = store.make_empty(dtype, {4, 4});
      Args args;
      args.tensor(lhs).tensor(rhs);
      if (c.alpha) args.integer(3);
      args.tensor(out).same_as(args.size() - 1);
      ASSERT_TRUE(is_ok(run_kernel(c.key, args))) << c.key;
      std::vector<float> expected;
      for (size_t i = 0; i < l.size(); ++i) expected.push_back(rounded(dtype, c.formula(l[i], r[i])));
      EXPECT_TRUE(same_floats(floats_of(out), expected)) << c.key << " " << dtype_name(dtype);
    }
    // Scalar overloads: the Scalar joins the computation in float.
    Tensor& scaled = store.make_empty(dtype, {4, 4});
    Args mul_scalar;
    mul_scalar.tensor(lhs).real(0.1).tensor(scaled).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::mul.Scalar_out", mul_scalar)));
    std::vector<float> expected;
    for (float v : l) expected.push_back(rounded(dtype, v * 0.1f));
    EXPECT_TRUE(same_floats(floats_of(scaled), expected));
  }
}

TEST(KernelHalf, PromotionFollowsPyTorch) {
  TensorStore store;
  Tensor& h = make_16bit(store, ScalarType::kHalf, {3}, {1.5f, -2.0f, 1000.0f});
  Tensor& bf = make_16bit(store, ScalarType::kBFloat16, {3}, {0.1f, 0.2f, 0.3f});
  Tensor& f = store.make<float>({3}, {0.1f, 0.2f, 0.3f});
  Tensor& i = store.make<int32_t>({3}, {1, 2, 70000});

  // float16 + float32 -> float32, exact in float.
  Tensor& f_out = store.make_empty(ScalarType::kFloat, {3});
  Args hf;
  hf.tensor(h).tensor(f).integer(1).tensor(f_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::add.out", hf)));
  EXPECT_EQ(values_of<float>(f_out), (std::vector<float>{1.5f + 0.1f, -2.0f + 0.2f, 1000.0f + 0.3f}));

  // float16 + bfloat16 -> float32.
  Tensor& mixed = store.make_empty(ScalarType::kFloat, {3});
  Args hb;
  hb.tensor(h).tensor(bf).integer(1).tensor(mixed).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::add.out", hb)));
  const auto bf_values = floats_of(bf);
  EXPECT_EQ(values_of<float>(mixed),
            (std::vector<float>{1.5f + bf_values[0], -2.0f + bf_values[1], 1000.0f + bf_values[2]}));

  // int32 + float16 -> float16: 70000 + 1000 overflows float16.
  Tensor& h_out = store.make_empty(ScalarType::kHalf, {3});
  Args ih;
  ih.tensor(i).tensor(h).integer(1).tensor(h_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::add.out", ih)));
  EXPECT_TRUE(same_floats(floats_of(h_out), {2.5f, 0.0f, kInf}));

  // A float16 result may be written to a float32 out; not to an integer out.
  Tensor& i_out = store.make_empty(ScalarType::kInt, {3});
  Args to_int;
  to_int.tensor(i).tensor(h).integer(1).tensor(i_out).same_as(3);
  const Status refused = run_kernel("aten::add.out", to_int);
  EXPECT_TRUE(fails_with(refused, {"float16", "cannot be cast", "int32"}));
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidProgram);

  // A Double Scalar keeps the tensor's float16 (same category).
  Tensor& kept = store.make_empty(ScalarType::kHalf, {3});
  Args scalar;
  scalar.tensor(h).real(0.1).integer(1).tensor(kept).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::add.Scalar_out", scalar)));
  EXPECT_TRUE(
      same_floats(floats_of(kept), {rounded(ScalarType::kHalf, 1.5f + 0.1f), rounded(ScalarType::kHalf, -2.0f + 0.1f),
                                    rounded(ScalarType::kHalf, 1000.0f + 0.1f)}));

  // Comparisons promote the same way.
  Tensor& flags = store.make_empty(ScalarType::kBool, {3});
  Args lt;
  lt.tensor(bf).tensor(f).tensor(flags).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::lt.Tensor_out", lt)));
  std::vector<bool> expected;
  const auto fv = values_of<float>(f);
  for (size_t k = 0; k < 3; ++k) expected.push_back(bf_values[k] < fv[k]);
  EXPECT_EQ(values_of<bool>(flags), expected);
}

TEST(KernelHalf, BadCombinationsStayTypedErrors) {
  TensorStore store;
  Tensor& h = make_16bit(store, ScalarType::kHalf, {2}, {1, 2});
  Tensor& out = store.make_empty(ScalarType::kHalf, {2});

  Args bitwise;
  bitwise.tensor(h).tensor(h).tensor(out).same_as(2);
  EXPECT_TRUE(fails_with(run_kernel("aten::bitwise_and.Tensor_out", bitwise), {"bitwise", "float16"}));

  // Matrix products need one dtype.
  Tensor& a = make_16bit(store, ScalarType::kHalf, {1, 2}, {1, 2});
  Tensor& b = store.make<float>({2, 1}, {1, 2});
  Tensor& product = store.make_empty(ScalarType::kHalf, {1, 1});
  Args mm;
  mm.tensor(a).tensor(b).tensor(product).same_as(2);
  const Status mixed = run_kernel("aten::mm.out", mm);
  EXPECT_TRUE(fails_with(mixed, {"mat2", "float32", "same dtype"}));
  EXPECT_EQ(mixed.error().code, ErrorCode::kInvalidProgram);

  // A fill value float16 cannot hold is refused, not turned into inf.
  Tensor& filled = store.make_empty(ScalarType::kHalf, {2});
  Args full;
  full.ints({2}).integer(70000).tensor(filled).same_as(2);
  const Status too_big = run_kernel("aten::full.out", full);
  EXPECT_TRUE(fails_with(too_big, {"70000", "float16"}));
  EXPECT_EQ(too_big.error().code, ErrorCode::kInvalidInput);
  Args fits;
  fits.ints({2}).real(65504.0).tensor(filled).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::full.out", fits)));
  EXPECT_EQ(floats_of(filled), (std::vector<float>{65504.0f, 65504.0f}));

  // Kernels not ported to them still refuse 16-bit floats by name.
  Tensor& erf = store.make_empty(ScalarType::kHalf, {2});
  Args unported;
  unported.tensor(h).tensor(erf).same_as(1);
  const Status unsupported = run_kernel("aten::erf.out", unported);
  EXPECT_TRUE(fails_with(unsupported, {"float16"}));
  EXPECT_EQ(unsupported.error().code, ErrorCode::kUnsupportedOperator);

  // So do float32/float64-only kernels, as unsupported rather than invalid.
  Tensor& var = store.make_empty(ScalarType::kHalf, {});
  Tensor& mean = store.make_empty(ScalarType::kHalf, {});
  Args var_mean;
  var_mean.tensor(h).none().none().boolean(false).outs({&var, &mean});
  const Status float_only = run_kernel("aten::var_mean.correction_out", var_mean);
  EXPECT_TRUE(fails_with(float_only, {"self", "float16", "float32 or float64"}));
  EXPECT_EQ(float_only.error().code, ErrorCode::kUnsupportedOperator);

  // half_to_float is refused as ExecuTorch's portable kernel refuses it.
  Tensor& wide = store.make_empty(ScalarType::kFloat, {2});
  Args softmax;
  softmax.tensor(h).integer(0).boolean(true).tensor(wide).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel("aten::_softmax.out", softmax), {"half_to_float"}));
}

TEST(KernelHalf, UnaryMathAndActivationsRoundTheFloatResult) {
  TensorStore store;
  Lcg rng(11);
  struct Case {
    const char* key;
    float (*formula)(float);
  };
  const Case cases[] = {
      {"aten::exp.out", [](float x) { return std::exp(x); }},
      {"aten::sigmoid.out", [](float x) { return 1.0f / (1.0f + std::exp(-x)); }},
      {"aten::tanh.out", [](float x) { return std::tanh(x); }},
      {"aten::neg.out", [](float x) { return -x; }},
      {"aten::sqrt.out", [](float x) { return std::sqrt(x); }},
      {"aten::rsqrt.out", [](float x) { return 1.0f / std::sqrt(x); }},
      {"aten::relu.out", [](float x) { return x < 0 ? 0.0f : x; }},
      {"aten::silu.out", [](float x) { return x * (1.0f / (1.0f + std::exp(-x))); }},
  };
  for (ScalarType dtype : kSixteenBit) {
    auto x = rng.floats(12, -4.0f, 4.0f);
    x.push_back(kNan);
    x.push_back(-0.5f);  // sqrt of a negative is NaN
    Tensor& self = make_16bit(store, dtype, {14}, x);
    const auto stored = floats_of(self);
    for (const Case& c : cases) {
      Tensor& out = store.make_empty(dtype, {14});
      ASSERT_TRUE(is_ok(run_unary(c.key, self, out))) << c.key;
      std::vector<float> expected;
      for (float v : stored) expected.push_back(rounded(dtype, c.formula(v)));
      EXPECT_TRUE(same_floats(floats_of(out), expected)) << c.key << " " << dtype_name(dtype);
    }
    // A float16 input may write a float32 out: the float result, unrounded.
    Tensor& wide = store.make_empty(ScalarType::kFloat, {14});
    Args exp_wide;
    exp_wide.tensor(self).tensor(wide).same_as(1);
    ASSERT_TRUE(is_ok(run_kernel("aten::exp.out", exp_wide)));
    std::vector<float> expected;
    for (float v : stored) expected.push_back(std::exp(v));
    EXPECT_TRUE(same_floats(values_of<float>(wide), expected));
  }
  // float16 exp overflows to inf past 11.09.
  Tensor& big = make_16bit(store, ScalarType::kHalf, {1}, {12.0f});
  Tensor& out = store.make_empty(ScalarType::kHalf, {1});
  Args exp_big;
  exp_big.tensor(big).tensor(out).same_as(1);
  ASSERT_TRUE(is_ok(run_kernel("aten::exp.out", exp_big)));
  EXPECT_EQ(bits_of(out)[0], 0x7C00);
}

TEST(KernelHalf, WhereAndMaskedFill) {
  TensorStore store;
  Tensor& cond = store.make<bool>({3}, {true, false, true});
  Tensor& a = make_16bit(store, ScalarType::kBFloat16, {3}, {1.1f, 2.2f, 3.3f});
  Tensor& b = make_16bit(store, ScalarType::kBFloat16, {3}, {-1, -2, -3});
  Tensor& out = store.make_empty(ScalarType::kBFloat16, {3});
  Args where;
  where.tensor(cond).tensor(a).tensor(b).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::where.self_out", where)));
  const auto av = floats_of(a);
  EXPECT_EQ(floats_of(out), (std::vector<float>{av[0], -2.0f, av[2]}));

  Tensor& filled = store.make_empty(ScalarType::kBFloat16, {3});
  Args masked;
  masked.tensor(a).tensor(cond).real(0.7).tensor(filled).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::masked_fill.Scalar_out", masked)));
  const float fill = rounded(ScalarType::kBFloat16, 0.7f);
  EXPECT_EQ(floats_of(filled), (std::vector<float>{fill, av[1], fill}));
}

// softmax along the last dim in double, rounded to float then to `dtype`
// (the kernel's float computation).
std::vector<float> reference_softmax(ScalarType dtype, const std::vector<float>& x, size_t rows, size_t cols) {
  std::vector<float> out;
  for (size_t r = 0; r < rows; ++r) {
    float max_value = -kInf;
    for (size_t c = 0; c < cols; ++c) max_value = std::max(max_value, x[r * cols + c]);
    double sum = 0;
    for (size_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(x[r * cols + c] - max_value));
    for (size_t c = 0; c < cols; ++c) {
      const double p = std::exp(static_cast<double>(x[r * cols + c] - max_value)) / sum;
      out.push_back(rounded(dtype, static_cast<float>(p)));
    }
  }
  return out;
}

TEST(KernelHalf, SoftmaxAndLayerNormComputeInFloat) {
  TensorStore store;
  Lcg rng(3);
  for (ScalarType dtype : kSixteenBit) {
    Tensor& self = make_16bit(store, dtype, {3, 5}, rng.floats(15, -6.0f, 6.0f));
    Tensor& out = store.make_empty(dtype, {3, 5});
    Args args;
    args.tensor(self).integer(-1).boolean(false).tensor(out).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::_softmax.out", args)));
    EXPECT_TRUE(same_floats(floats_of(out), reference_softmax(dtype, floats_of(self), 3, 5)));

    // Layer norm: statistics in double from the stored inputs, each output
    // rounded once.
    const std::vector<float> w = {1, 2, 0.5f, -1}, b = {0, 1, 0, 0.5f};
    Tensor& input = make_16bit(store, dtype, {2, 4}, rng.floats(8, -3.0f, 3.0f));
    Tensor& weight = make_16bit(store, dtype, {4}, w);
    Tensor& bias = make_16bit(store, dtype, {4}, b);
    Tensor& normed = store.make_empty(dtype, {2, 4});
    Tensor& mean = store.make_empty(dtype, {2, 1});
    Tensor& rstd = store.make_empty(dtype, {2, 1});
    Args norm;
    norm.tensor(input).ints({4}).tensor(weight).tensor(bias).real(1e-5).outs({&normed, &mean, &rstd});
    ASSERT_TRUE(is_ok(run_kernel("aten::native_layer_norm.out", norm)));
    const auto x = floats_of(input);
    for (size_t row = 0; row < 2; ++row) {
      const auto [m, r] = row_statistics(x, row, 4, 1e-5);
      EXPECT_EQ(floats_of(mean)[row], rounded(dtype, static_cast<float>(m)));
      EXPECT_EQ(floats_of(rstd)[row], rounded(dtype, static_cast<float>(r)));
      for (size_t j = 0; j < 4; ++j) {
        const double y = (x[row * 4 + j] - m) * r * w[j] + b[j];
        EXPECT_EQ(floats_of(normed)[row * 4 + j], rounded(dtype, static_cast<float>(y))) << row << "," << j;
      }
    }
  }
}

TEST(KernelHalf, MatrixProductsAccumulateInFloat) {
  TensorStore store;
  // 2047 + 1 + 1 + 1 = 2050 is a float16. Rounding after every step would
  // give 2048 (2049 ties to even 2048 each time).
  Tensor& row = make_16bit(store, ScalarType::kHalf, {1, 4}, {2047, 1, 1, 1});
  Tensor& ones = make_16bit(store, ScalarType::kHalf, {4, 1}, {1, 1, 1, 1});
  Tensor& product = store.make_empty(ScalarType::kHalf, {1, 1});
  Args mm;
  mm.tensor(row).tensor(ones).tensor(product).same_as(2);
  ASSERT_TRUE(is_ok(run_kernel("aten::mm.out", mm)));
  EXPECT_EQ(floats_of(product), (std::vector<float>{2050.0f}));

  Tensor& weight = make_16bit(store, ScalarType::kHalf, {1, 4}, {1, 1, 1, 1});
  Tensor& linear_out = store.make_empty(ScalarType::kHalf, {1, 1});
  Args linear;
  linear.tensor(row).tensor(weight).none().tensor(linear_out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::linear.out", linear)));
  EXPECT_EQ(floats_of(linear_out), (std::vector<float>{2050.0f}));

  // Random operands against a double reference rounded once; the values are
  // multiples of 1/8 below 8, so float accumulation is exact.
  Lcg rng(5);
  auto eighths = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = static_cast<float>(rng.integer(-64, 64)) / 8.0f;
    return v;
  };
  for (ScalarType dtype : kSixteenBit) {
    const auto av = eighths(2 * 3 * 4), bv = eighths(2 * 4 * 5), biasv = eighths(5);
    Tensor& a = make_16bit(store, dtype, {2, 3, 4}, av);
    Tensor& b = make_16bit(store, dtype, {2, 4, 5}, bv);
    Tensor& out = store.make_empty(dtype, {2, 3, 5});
    Args bmm;
    bmm.tensor(a).tensor(b).tensor(out).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::bmm.out", bmm)));
    std::vector<float> expected;
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 5; ++j) {
          double acc = 0;
          for (int k = 0; k < 4; ++k) acc += av[(n * 3 + i) * 4 + k] * bv[(n * 4 + k) * 5 + j];
          expected.push_back(rounded(dtype, static_cast<float>(acc)));
        }
      }
    }
    EXPECT_TRUE(same_floats(floats_of(out), expected)) << dtype_name(dtype);

    // addmm: beta * bias + alpha * (a @ b), rounded once.
    Tensor& mat1 = make_16bit(store, dtype, {3, 4}, std::vector<float>(av.begin(), av.begin() + 12));
    Tensor& mat2 = make_16bit(store, dtype, {4, 5}, std::vector<float>(bv.begin(), bv.begin() + 20));
    Tensor& bias = make_16bit(store, dtype, {5}, biasv);
    Tensor& added = store.make_empty(dtype, {3, 5});
    Args addmm;
    addmm.tensor(bias).tensor(mat1).tensor(mat2).real(0.5).integer(3).tensor(added).same_as(5);
    ASSERT_TRUE(is_ok(run_kernel("aten::addmm.out", addmm)));
    std::vector<float> expected_addmm;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += av[i * 4 + k] * bv[k * 5 + j];
        expected_addmm.push_back(rounded(dtype, static_cast<float>(3 * acc + 0.5 * biasv[j])));
      }
    }
    EXPECT_TRUE(same_floats(floats_of(added), expected_addmm)) << dtype_name(dtype);
  }
}

TEST(KernelHalf, ShapeAndIndexingOpsMoveSixteenBitElements) {
  TensorStore store;
  for (ScalarType dtype : kSixteenBit) {
    const std::vector<float> values = {0.5f, 1.5f, -2.25f, 3.0f, 100.0f, -0.125f};
    Tensor& self = make_16bit(store, dtype, {2, 3}, values);
    const auto bits = bits_of(self);

    Tensor& permuted = store.make_empty(dtype, {3, 2});
    Args permute;
    permute.tensor(self).ints({1, 0}).tensor(permuted).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::permute_copy.out", permute)));
    EXPECT_EQ(bits_of(permuted), (std::vector<uint16_t>{bits[0], bits[3], bits[1], bits[4], bits[2], bits[5]}));

    Tensor& viewed = store.make_empty(dtype, {6});
    Args view;
    view.tensor(self).ints({6}).tensor(viewed).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::view_copy.out", view)));
    EXPECT_EQ(bits_of(viewed), bits);

    Tensor& sliced = store.make_empty(dtype, {2, 2});
    Args slice;
    slice.tensor(self).integer(1).integer(1).integer(3).integer(1).tensor(sliced).same_as(5);
    ASSERT_TRUE(is_ok(run_kernel("aten::slice_copy.Tensor_out", slice)));
    EXPECT_EQ(bits_of(sliced), (std::vector<uint16_t>{bits[1], bits[2], bits[4], bits[5]}));

    Tensor& joined = store.make_empty(dtype, {4, 3});
    Args cat;
    cat.tensors({&self, &self}).integer(0).tensor(joined).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::cat.out", cat)));
    std::vector<uint16_t> twice = bits;
    twice.insert(twice.end(), bits.begin(), bits.end());
    EXPECT_EQ(bits_of(joined), twice);

    // An embedding table of 16-bit floats (what LLM exports hold).
    Tensor& tokens = store.make<int64_t>({3}, {1, 0, 1});
    Tensor& rows = store.make_empty(dtype, {3, 3});
    Args embedding;
    embedding.tensor(self).tensor(tokens).integer(-1).boolean(false).boolean(false).tensor(rows).same_as(5);
    ASSERT_TRUE(is_ok(run_kernel("aten::embedding.out", embedding)));
    EXPECT_EQ(bits_of(rows),
              (std::vector<uint16_t>{bits[3], bits[4], bits[5], bits[0], bits[1], bits[2], bits[3], bits[4], bits[5]}));

    Tensor& picked = store.make_empty(dtype, {2, 1});
    Tensor& index = store.make<int64_t>({1}, {2});
    Args index_select;
    index_select.tensor(self).integer(1).tensor(index).tensor(picked).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::index_select.out", index_select)));
    EXPECT_EQ(bits_of(picked), (std::vector<uint16_t>{bits[2], bits[5]}));

    // A view op that also converts: float16/bfloat16 into float32.
    Tensor& widened = store.make_empty(ScalarType::kFloat, {6});
    Args view_wide;
    view_wide.tensor(self).ints({-1}).tensor(widened).same_as(2);
    ASSERT_TRUE(is_ok(run_kernel("aten::view_copy.out", view_wide)));
    EXPECT_EQ(values_of<float>(widened), floats_of(self));
  }
}

TEST(KernelHalf, IndexPutWritesSixteenBitCachesAndAccumulatesInFloat) {
  TensorStore store;
  for (ScalarType dtype : kSixteenBit) {
    // cache[:, positions] = values on a [2, 4] cache, as a KV-cache write.
    Tensor& cache = make_16bit(store, dtype, {2, 4}, std::vector<float>(8, 0.0f));
    Tensor& positions = store.make<int64_t>({1}, {2});
    Tensor& values = make_16bit(store, dtype, {2, 1}, {0.3f, -7.1f});
    Args put;
    put.tensor(cache).optional_tensors({nullptr, &positions}).tensor(values).boolean(false).same_as(0);
    ASSERT_TRUE(is_ok(run_kernel("aten::index_put_", put)));
    const auto v = floats_of(values);
    EXPECT_EQ(floats_of(cache), (std::vector<float>{0, 0, v[0], 0, 0, 0, v[1], 0}));

    // accumulate adds in float and rounds the sum once.
    Tensor& base = make_16bit(store, dtype, {2}, {1.0f, 256.0f});
    Tensor& rows = store.make<int64_t>({2}, {0, 1});
    Tensor& add = make_16bit(store, dtype, {2}, {0.1f, 0.6f});
    Tensor& out = store.make_empty(dtype, {2});
    Args accumulate;
    accumulate.tensor(base).optional_tensors({&rows}).tensor(add).boolean(true).tensor(out).same_as(4);
    ASSERT_TRUE(is_ok(run_kernel("aten::index_put.out", accumulate)));
    const auto a = floats_of(add);
    EXPECT_EQ(floats_of(out), (std::vector<float>{rounded(dtype, 1.0f + a[0]), rounded(dtype, 256.0f + a[1])}));
  }
}

TEST(KernelHalf, ExtremesCompareExactlyAndKeepTheStoredBits) {
  TensorStore store;
  for (ScalarType dtype : kSixteenBit) {
    // Logits as an LLM's greedy decoding reads them: argmax, max.dim, topk.
    Tensor& logits = make_16bit(store, dtype, {2, 4}, {0.5f, 3.25f, -1.0f, 3.0f, kNan, 1.0f, -kInf, 2.0f});
    const auto bits = bits_of(logits);
    Tensor& best = store.make_empty(ScalarType::kLong, {2});
    Args argmax;
    argmax.tensor(logits).integer(1).boolean(false).tensor(best).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::argmax.out", argmax)));
    EXPECT_EQ(values_of<int64_t>(best), (std::vector<int64_t>{1, 0}));  // NaN counts as the maximum

    Tensor& values = store.make_empty(dtype, {2});
    Tensor& indices = store.make_empty(ScalarType::kLong, {2});
    Args min_dim;
    min_dim.tensor(logits).integer(1).boolean(false).outs({&values, &indices});
    ASSERT_TRUE(is_ok(run_kernel("aten::min.dim_min", min_dim)));
    EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{2, 0}));
    EXPECT_EQ(bits_of(values), (std::vector<uint16_t>{bits[2], bits[4]}));

    Tensor& top_values = store.make_empty(dtype, {1, 2});
    Tensor& top_indices = store.make_empty(ScalarType::kLong, {1, 2});
    Tensor& first_row = make_16bit(store, dtype, {1, 4}, {0.5f, 3.25f, -1.0f, 3.0f});
    Args topk;
    topk.tensor(first_row).integer(2).integer(-1).boolean(true).boolean(true).outs({&top_values, &top_indices});
    ASSERT_TRUE(is_ok(run_kernel("aten::topk.values", topk)));
    EXPECT_EQ(values_of<int64_t>(top_indices), (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(floats_of(top_values), (std::vector<float>{3.25f, 3.0f}));

    // amax into a float32 out widens exactly.
    Tensor& widest = store.make_empty(ScalarType::kFloat, {4});
    ASSERT_TRUE(is_ok(run_reduction("aten::amax.out", logits, {0}, false, widest)));
    EXPECT_TRUE(same_floats(values_of<float>(widest), {kNan, 3.25f, -1.0f, 3.0f}));

    Tensor& zeros = make_16bit(store, dtype, {3}, {0.0f, -0.0f, 0.0f});
    Tensor& found = store.make_empty(ScalarType::kBool, {});
    Args any;
    any.tensor(zeros).tensor(found).same_as(1);
    ASSERT_TRUE(is_ok(run_kernel("aten::any.all_out", any)));
    EXPECT_EQ(values_of<bool>(found), (std::vector<bool>{false}));  // -0 is zero
    Args any_logits;
    any_logits.tensor(logits).tensor(found).same_as(1);
    ASSERT_TRUE(is_ok(run_kernel("aten::any.all_out", any_logits)));
    EXPECT_EQ(values_of<bool>(found), (std::vector<bool>{true}));
  }
}

TEST(KernelHalf, FactoriesScatterPadClampCumsumAndScalarReads) {
  TensorStore store;
  for (ScalarType dtype : kSixteenBit) {
    Tensor& range = store.make_empty(dtype, {4});
    Args arange;
    arange.real(0.0).real(1.0).real(0.3).tensor(range).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::arange.start_out", arange)));
    EXPECT_EQ(floats_of(range), (std::vector<float>{0.0f, rounded(dtype, 0.3f), rounded(dtype, 0.6f),
                                                    rounded(dtype, static_cast<float>(3 * 0.3))}));

    Tensor& self = make_16bit(store, dtype, {1, 3}, {1.5f, -2.0f, 9.0f});
    Tensor& index = store.make<int64_t>({1, 1}, {2});
    Tensor& scattered = store.make_empty(dtype, {1, 3});
    Args scatter;
    scatter.tensor(self).integer(1).tensor(index).real(0.1).tensor(scattered).same_as(4);
    ASSERT_TRUE(is_ok(run_kernel("aten::scatter.value_out", scatter)));
    EXPECT_EQ(floats_of(scattered), (std::vector<float>{1.5f, -2.0f, rounded(dtype, 0.1f)}));

    Tensor& padded = store.make_empty(dtype, {1, 5});
    Args pad;
    pad.tensor(self).ints({1, 1}).real(0.2).tensor(padded).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::constant_pad_nd.out", pad)));
    const float fill = rounded(dtype, 0.2f);
    EXPECT_EQ(floats_of(padded), (std::vector<float>{fill, 1.5f, -2.0f, 9.0f, fill}));

    // clamp bounds are float Scalars; the float result is rounded once.
    Tensor& clamped = store.make_empty(dtype, {1, 3});
    Args clamp;
    clamp.tensor(self).real(-1.1).real(3.3).tensor(clamped).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::clamp.out", clamp)));
    EXPECT_EQ(floats_of(clamped), (std::vector<float>{1.5f, rounded(dtype, -1.1f), rounded(dtype, 3.3f)}));

    // cumsum keeps a wide running total and rounds each output once.
    Tensor& steps = make_16bit(store, dtype, {4}, {256.0f, 0.75f, 0.75f, 0.75f});
    Tensor& running = store.make_empty(dtype, {4});
    Args cumsum;
    cumsum.tensor(steps).integer(0).none().tensor(running).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::cumsum.out", cumsum)));
    EXPECT_EQ(floats_of(running),
              (std::vector<float>{256.0f, rounded(dtype, 256.75f), rounded(dtype, 257.5f), rounded(dtype, 258.25f)}));

    Tensor& one = make_16bit(store, dtype, {1}, {-0.1f});
    Args scalar;
    scalar.tensor(one).none();
    ASSERT_TRUE(is_ok(run_kernel("aten::_local_scalar_dense", scalar)));
    ASSERT_TRUE(scalar[1].is_double());
    EXPECT_EQ(scalar[1].to_double(), static_cast<double>(rounded(dtype, -0.1f)));
  }
}

TEST(KernelHalf, SumAndMeanAccumulateWideAndRoundOnce) {
  TensorStore store;
  // 2048 + 1 + 1: a float16 running sum would stay at 2048.
  Tensor& self = make_16bit(store, ScalarType::kHalf, {2, 3}, {2048, 1, 1, 0.1f, 0.2f, 0.3f});
  const auto x = floats_of(self);
  Tensor& sums = store.make_empty(ScalarType::kHalf, {2});
  Args sum;
  sum.tensor(self).ints({1}).boolean(false).none().tensor(sums).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::sum.IntList_out", sum)));
  EXPECT_EQ(floats_of(sums),
            (std::vector<float>{
                2050.0f, rounded(ScalarType::kHalf, static_cast<float>(static_cast<double>(x[3]) + x[4] + x[5]))}));

  Tensor& means = store.make_empty(ScalarType::kBFloat16, {2, 1});
  Args mean;
  mean.tensor(self).ints({-1}).boolean(true).dtype(ScalarType::kBFloat16).tensor(means).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::mean.out", mean)));
  EXPECT_EQ(floats_of(means),
            (std::vector<float>{
                rounded(ScalarType::kBFloat16, 2050.0f / 3),
                rounded(ScalarType::kBFloat16, static_cast<float>((static_cast<double>(x[3]) + x[4] + x[5]) / 3))}));
}

// The operators export_llama's -d bf16 / -d fp16 graphs run outside their
// delegates (RMSNorm, rotary embedding, the SiLU gate, residual adds), on
// NaN, the infinities, signed zeros and subnormals: each result is the
// float32 formula rounded once, bit for bit, with -0 and NaN kept.
TEST(KernelHalf, LlamaGraphOperatorsKeepSpecialsAndSubnormals) {
  TensorStore store;
  for (ScalarType dtype : kSixteenBit) {
    const bool brain = dtype == ScalarType::kBFloat16;
    const float tiny = brain ? bfloat16_to_float(0x0001) : kernels::half_to_float(0x0001);
    const float largest_subnormal = brain ? bfloat16_to_float(0x007F) : kernels::half_to_float(0x03FF);
    const std::vector<float> x = {kNan, kInf, -kInf, -0.0f, 0.0f, tiny, largest_subnormal, 1.5f, -2.75f, 1e-3f};
    const std::vector<float> y = {1.0f, -kInf, -kInf, -0.0f, -0.0f, tiny, -largest_subnormal, 0.5f, 3.0f, -1e-3f};
    const auto n = static_cast<int64_t>(x.size());
    Tensor& a = make_16bit(store, dtype, {n}, x);
    Tensor& b = make_16bit(store, dtype, {n}, y);
    const auto av = floats_of(a);
    const auto bv = floats_of(b);
    // Bit-exact, NaN matching any NaN.
    auto expect_bits = [&](const Tensor& out, const std::vector<float>& expected, const char* what) {
      const auto got = bits_of(out);
      for (size_t i = 0; i < expected.size(); ++i) {
        if (std::isnan(expected[i])) {
          EXPECT_TRUE(std::isnan(floats_of(out)[i])) << what << " element " << i << " " << dtype_name(dtype);
        } else {
          EXPECT_EQ(got[i], round_bits(dtype, expected[i])) << what << " element " << i << " " << dtype_name(dtype);
        }
      }
    };
    auto each = [&](auto formula) {
      std::vector<float> out;
      for (size_t i = 0; i < av.size(); ++i) out.push_back(formula(av[i], bv[i]));
      return out;
    };

    Tensor& product = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_binary("aten::mul.out", a, b, product)));
    expect_bits(product, each([](float p, float q) { return p * q; }), "mul");  // tiny * tiny underflows to +0

    Tensor& sum = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_binary("aten::add.out", a, b, int64_t{1}, sum)));
    expect_bits(sum, each([](float p, float q) { return p + q; }), "add");  // -0 + -0 = -0, inf - inf = NaN

    Tensor& difference = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_binary("aten::sub.out", a, b, int64_t{1}, difference)));
    expect_bits(difference, each([](float p, float q) { return p - q; }), "sub");

    // RMSNorm's epsilon: a Double Scalar, converted to float.
    Tensor& shifted = store.make_empty(dtype, {n});
    Args add_eps;
    add_eps.tensor(a).real(1e-5).integer(1).tensor(shifted).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("aten::add.Scalar_out", add_eps)));
    expect_bits(shifted, each([](float p, float) { return p + 1e-5f; }), "add.Scalar");

    Tensor& inverse = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_unary("aten::rsqrt.out", a, inverse)));
    expect_bits(inverse, each([](float p, float) { return 1.0f / std::sqrt(p); }), "rsqrt");  // rsqrt(-0) = -inf
    EXPECT_EQ(floats_of(inverse)[3], -kInf);

    Tensor& gated = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_unary("aten::silu.out", a, gated)));
    expect_bits(gated, each([](float p, float) { return p * (1.0f / (1.0f + std::exp(-p))); }), "silu");
    EXPECT_EQ(bits_of(gated)[3], 0x8000);  // silu(-0) = -0

    Tensor& negated = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_unary("aten::neg.out", a, negated)));
    expect_bits(negated, each([](float p, float) { return -p; }), "neg");
    EXPECT_EQ(bits_of(negated)[4], 0x8000);  // -(+0) = -0

    Tensor& magnitude = store.make_empty(dtype, {n});
    ASSERT_TRUE(is_ok(run_unary("aten::abs.out", a, magnitude)));
    expect_bits(magnitude, each([](float p, float) { return std::fabs(p); }), "abs");
    EXPECT_EQ(bits_of(magnitude)[3], 0x0000);  // |-0| = +0

    // mean sums and divides in float: a row of the largest finite values
    // averages to itself in float16 (a float16 running sum would overflow)
    // and overflows past float32's range in bfloat16, as PyTorch's does.
    const float largest = brain ? bfloat16_to_float(0x7F7F) : 65504.0f;
    Tensor& rows = make_16bit(store, dtype, {4, 2}, {largest, largest, tiny, tiny, kInf, 1.0f, kNan, 1.0f});
    Tensor& means = store.make_empty(dtype, {4, 1});
    Args mean;
    mean.tensor(rows).ints({-1}).boolean(true).none().tensor(means).same_as(4);
    ASSERT_TRUE(is_ok(run_kernel("aten::mean.out", mean)));
    const auto averaged = floats_of(means);
    EXPECT_EQ(averaged[0], brain ? kInf : largest) << dtype_name(dtype);
    EXPECT_EQ(averaged[1], tiny) << dtype_name(dtype);
    EXPECT_EQ(averaged[2], kInf) << dtype_name(dtype);
    EXPECT_TRUE(std::isnan(averaged[3])) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace etna::kernel_test
