// quantized_decomposed:: operators, checked against values worked out by hand
// from ExecuTorch's formulas (ties to even, zero-point offsets, nibble order),
// and the 16-bit float conversions they rely on.

#include <cmath>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "kernel_test_support.h"
#include "kernels/real_elements.h"

namespace etna::kernel_test {
namespace {

using kernels::float_to_half;
using kernels::half_to_float;

TEST(RealElements, HalfAndBfloat16RoundTripAndRoundToEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // overflows to infinity
  EXPECT_EQ(float_to_half(0.1f), 0x2E66);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie, stays even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie, rounds up to even
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(half_to_float(0xFC00)));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  for (uint32_t bits = 0; bits < 0x7C00; bits += 7) {
    EXPECT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(bits))), bits);
  }
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(float_to_bfloat16(1.00390625f), 0x3F80);  // 1 + 2^-8: tie, stays even
  EXPECT_EQ(float_to_bfloat16(1.01171875f), 0x3F82);  // 1 + 3 * 2^-8: tie, rounds up to even
}

TEST(QuantizePerTensor, RoundsTiesToEvenAndClamps) {
  TensorStore store;
  Tensor& input = store.make<float>({6}, {0.25f, 0.75f, -0.25f, 10.0f, -100.0f, 1.0f});
  Tensor& out = store.make_empty(ScalarType::kChar, {6});
  Args args;
  // scale 0.5, zero point 3, range [-10, 20]
  args.tensor(input).real(0.5).integer(3).integer(-10).integer(20).dtype(ScalarType::kChar).tensor(out).same_as(6);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::quantize_per_tensor.out", args)));
  // 0.5 -> 0 (even), 1.5 -> 2, -0.5 -> -0, 20 + 3 clamps to 20, -200 + 3 clamps to -10, 2 + 3
  EXPECT_EQ(values_of<int8_t>(out), (std::vector<int8_t>{3, 5, 3, 20, -10, 5}));
}

TEST(QuantizePerTensor, TensorArgsAndRangeChecks) {
  TensorStore store;
  Tensor& input = store.make<float>({3}, {0.0f, 1.0f, 2.0f});
  Tensor& scale = store.make<double>({1}, {0.25});
  Tensor& zero_point = store.make<int64_t>({1}, {10});
  Tensor& out = store.make_empty(ScalarType::kByte, {3});
  Args args;
  args.tensor(input)
      .tensor(scale)
      .tensor(zero_point)
      .integer(0)
      .integer(255)
      .dtype(ScalarType::kByte)
      .tensor(out)
      .same_as(6);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::quantize_per_tensor.Tensor_out", args)));
  EXPECT_EQ(values_of<uint8_t>(out), (std::vector<uint8_t>{10, 14, 18}));

  Args wide;
  wide.tensor(input).real(0.25).integer(0).integer(0).integer(300).dtype(ScalarType::kByte).tensor(out).same_as(6);
  EXPECT_TRUE(fails_with(run_kernel("quantized_decomposed::quantize_per_tensor.out", wide), {"does not fit uint8"}));
  Args mismatch;
  mismatch.tensor(input).real(0.25).integer(0).integer(0).integer(127).dtype(ScalarType::kChar).tensor(out).same_as(6);
  EXPECT_FALSE(is_ok(run_kernel("quantized_decomposed::quantize_per_tensor.out", mismatch)));
}

TEST(DequantizePerTensor, SubtractsZeroPointThenScalesWithOrWithoutOutDtype) {
  TensorStore store;
  Tensor& input = store.make<int8_t>({4}, {-128, -1, 0, 127});
  Tensor& out = store.make_empty(ScalarType::kFloat, {4});
  // input, scale 0.5, zero point -1 and the int8 range: what every call below dequantizes.
  const auto quantized_input = [&](Args& args) -> Args& {
    return args.tensor(input).real(0.5).integer(-1).integer(-128).integer(127).dtype(ScalarType::kChar);
  };
  Args old_form;
  quantized_input(old_form).tensor(out).same_as(6);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::dequantize_per_tensor.out", old_form)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-63.5f, 0.0f, 0.5f, 64.0f}));

  Tensor& half_out = store.make_empty(ScalarType::kHalf, {4});
  Args new_form;
  quantized_input(new_form).dtype(ScalarType::kHalf).tensor(half_out).same_as(7);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::dequantize_per_tensor.out", new_form)));
  const auto bits = values_of<int16_t>(half_out);
  EXPECT_EQ(half_to_float(static_cast<uint16_t>(bits[0])), -63.5f);
  EXPECT_EQ(half_to_float(static_cast<uint16_t>(bits[3])), 64.0f);

  Args wrong_out;
  quantized_input(wrong_out).dtype(ScalarType::kFloat).tensor(half_out).same_as(7);
  EXPECT_FALSE(is_ok(run_kernel("quantized_decomposed::dequantize_per_tensor.out", wrong_out)));
}

TEST(PerChannel, QuantizesAndDequantizesAlongAxis) {
  TensorStore store;
  // [2, 3, 2], channels along axis 1.
  std::vector<float> x = {0.5f, 1.0f, 2.0f, 4.0f, -3.0f, 3.0f, 1.5f, -1.0f, 6.0f, 8.0f, 0.0f, 9.0f};
  Tensor& input = store.make<float>({2, 3, 2}, x);
  Tensor& scales = store.make<double>({3}, {0.5, 2.0, 1.0});
  Tensor& zero_points = store.make<int64_t>({3}, {0, 1, -2});
  Tensor& q = store.make_empty(ScalarType::kChar, {2, 3, 2});
  Args quantize;
  quantize.tensor(input)
      .tensor(scales)
      .tensor(zero_points)
      .integer(1)
      .integer(-128)
      .integer(127)
      .dtype(ScalarType::kChar)
      .tensor(q)
      .same_as(7);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::quantize_per_channel.out", quantize)));
  // channel 0: x/0.5; channel 1: x/2 + 1; channel 2: x - 2
  EXPECT_EQ(values_of<int8_t>(q), (std::vector<int8_t>{1, 2, 2, 3, -5, 1, 3, -2, 4, 5, -2, 7}));

  Tensor& back = store.make_empty(ScalarType::kFloat, {2, 3, 2});
  Args dequantize;
  dequantize.tensor(q)
      .tensor(scales)
      .tensor(zero_points)
      .integer(-2)
      .integer(-128)
      .integer(127)
      .dtype(ScalarType::kChar)
      .none()
      .tensor(back)
      .same_as(8);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::dequantize_per_channel.out", dequantize)));
  EXPECT_EQ(values_of<float>(back),
            (std::vector<float>{0.5f, 1.0f, 2.0f, 4.0f, -3.0f, 3.0f, 1.5f, -1.0f, 6.0f, 8.0f, 0.0f, 9.0f}));

  Tensor& short_scales = store.make<double>({2}, {1.0, 1.0});
  Args refused;
  refused.tensor(q)
      .tensor(short_scales)
      .none()
      .integer(1)
      .integer(-128)
      .integer(127)
      .dtype(ScalarType::kChar)
      .tensor(back)
      .same_as(7);
  EXPECT_TRUE(fails_with(run_kernel("quantized_decomposed::dequantize_per_channel.out", refused), {"must hold 3"}));
}

// quantize_per_token.out of `input` into int8 `codes` over [-128, 127].
Status quantize_per_token_int8(Tensor& input, Tensor& scales, Tensor& zero_points, Tensor& codes) {
  Args quantize;
  quantize.tensor(input)
      .tensor(scales)
      .tensor(zero_points)
      .integer(-128)
      .integer(127)
      .dtype(ScalarType::kChar)
      .tensor(codes)
      .same_as(6);
  return run_kernel("quantized_decomposed::quantize_per_token.out", quantize);
}

TEST(PerToken, ChoosesQuantizesAndDequantizesEachRow) {
  TensorStore store;
  std::vector<float> x = {-1.0f, 0.0f, 3.0f, 0.5f, 1.2f, 2.0f};
  Tensor& input = store.make<float>({2, 3}, x);
  Tensor& scales = store.make_empty(ScalarType::kFloat, {2, 1});
  Tensor& zero_points = store.make_empty(ScalarType::kLong, {2, 1});
  Args choose;
  choose.tensor(input).dtype(ScalarType::kChar).tensor(scales).tensor(zero_points);
  std::vector<Tensor*> outs = {&scales, &zero_points};
  choose.tensors(outs);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::choose_qparams_per_token_asymmetric.out", choose)));
  // Row 0: range [-1, 3] -> scale 4/255, zero point from the max end: nearbyint(127 - 191.25) = -64.
  // Row 1: range [0, 2] -> scale 2/255, zero point -128.
  const auto s = values_of<float>(scales);
  EXPECT_FLOAT_EQ(s[0], 4.0f / 255.0f);
  EXPECT_FLOAT_EQ(s[1], 2.0f / 255.0f);
  EXPECT_EQ(values_of<int64_t>(zero_points), (std::vector<int64_t>{-64, -128}));

  Tensor& q = store.make_empty(ScalarType::kChar, {2, 3});
  ASSERT_TRUE(is_ok(quantize_per_token_int8(input, scales, zero_points, q)));
  EXPECT_EQ(values_of<int8_t>(q), (std::vector<int8_t>{-128, -64, 127, -64, 25, 127}));

  Tensor& back = store.make_empty(ScalarType::kFloat, {2, 3});
  Args dequantize;
  dequantize.tensor(q)
      .tensor(scales)
      .tensor(zero_points)
      .integer(-128)
      .integer(127)
      .dtype(ScalarType::kChar)
      .dtype(ScalarType::kFloat)
      .tensor(back)
      .same_as(7);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::dequantize_per_token.out", dequantize)));
  const auto restored = values_of<float>(back);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(restored[i], x[i], s[i / 3] / 2 + 1e-6f) << "element " << i;
}

// 16-bit rows stored from `values` (exact in both formats).
Tensor& sixteen_bit(TensorStore& store, ScalarType dtype, std::vector<int64_t> sizes,
                    const std::vector<float>& values) {
  Tensor& t = store.make_empty(dtype, std::move(sizes));
  auto* bits = static_cast<uint16_t*>(t.data());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = dtype == ScalarType::kHalf ? float_to_half(values[i]) : float_to_bfloat16(values[i]);
  return t;
}

// choose_qparams_per_token_asymmetric then quantize_per_token of `input` [rows, width]: scales, zero points, codes.
struct PerTokenResult {
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  std::vector<int8_t> codes;
};

PerTokenResult quantize_rows(TensorStore& store, Tensor& input) {
  const int64_t rows = input.size(0);
  Tensor& scales = store.make_empty(ScalarType::kDouble, {rows, 1});
  Tensor& zero_points = store.make_empty(ScalarType::kLong, {rows, 1});
  Args choose;
  choose.tensor(input).dtype(ScalarType::kChar).tensor(scales).tensor(zero_points);
  std::vector<Tensor*> outs = {&scales, &zero_points};
  choose.tensors(outs);
  EXPECT_TRUE(is_ok(run_kernel("quantized_decomposed::choose_qparams_per_token_asymmetric.out", choose)));
  Tensor& codes = store.make_empty(ScalarType::kChar, shape_of(input));
  EXPECT_TRUE(is_ok(quantize_per_token_int8(input, scales, zero_points, codes)));
  return {values_of<double>(scales), values_of<int64_t>(zero_points), values_of<int8_t>(codes)};
}

TEST(PerToken, SixteenBitRowsAreWidenedToFloat32) {
  const float inf = std::numeric_limits<float>::infinity();
  // Rows exact in float16 and bfloat16: a hand-worked one, -0 beside +0, and rows holding ±Inf and NaN.
  const std::vector<float> x = {-1.0f, 0.0f, 3.0f, 0.5f, -0.0f, 0.0f,          -0.0f, 2.0f, -1.0f, 0.25f,
                                inf,   -inf, 1.0f, 0.5f, 1.0f,  std::nanf(""), -2.0f, 4.0f, 0.5f,  -0.0f};
  TensorStore store;
  const PerTokenResult wide = quantize_rows(store, store.make<float>({4, 5}, x));
  // Row 0: range [-1, 3] -> scale 4/255, zero point nearbyint(127 - 191.25) = -64, as the float32 test above.
  EXPECT_DOUBLE_EQ(wide.scales[0], 4.0 / 255.0);
  EXPECT_EQ(wide.zero_points[0], -64);
  EXPECT_EQ(std::vector<int8_t>(wide.codes.begin(), wide.codes.begin() + 5),
            (std::vector<int8_t>{-128, -64, 127, -32, -64}));
  // Row 1 spans [-1, 2]: -0 and +0 both land on the zero point.
  EXPECT_EQ(wide.codes[5], wide.zero_points[1]);
  EXPECT_EQ(wide.codes[6], wide.zero_points[1]);
  // A row spanning -Inf to Inf has an infinite scale, so a zero inverse scale: every code is the zero point, 0
  // (0 * ±Inf is NaN, which converts to 0).
  EXPECT_TRUE(std::isinf(wide.scales[2]));
  EXPECT_EQ(wide.zero_points[2], 0);
  EXPECT_EQ(std::vector<int8_t>(wide.codes.begin() + 10, wide.codes.begin() + 15), (std::vector<int8_t>(5, 0)));
  for (ScalarType dtype : {ScalarType::kHalf, ScalarType::kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const PerTokenResult narrow = quantize_rows(store, sixteen_bit(store, dtype, {4, 5}, x));
    ASSERT_EQ(narrow.scales.size(), wide.scales.size());
    for (size_t r = 0; r < wide.scales.size(); ++r) {
      EXPECT_TRUE(narrow.scales[r] == wide.scales[r] || (std::isnan(narrow.scales[r]) && std::isnan(wide.scales[r])))
          << "row " << r;
    }
    EXPECT_EQ(narrow.zero_points, wide.zero_points);
    EXPECT_EQ(narrow.codes, wide.codes);
  }
}

TEST(PerToken, SixteenBitQuantizeRoundsTheWidenedProductOnce) {
  // 0.1 is not exact in bfloat16: the kernel quantizes the stored value, inverse scale times it in float32.
  TensorStore store;
  const float stored = bfloat16_to_float(float_to_bfloat16(0.1f));
  Tensor& input = sixteen_bit(store, ScalarType::kBFloat16, {1, 3}, {0.1f, -0.0f, -0.1f});
  Tensor& scales = store.make<double>({1, 1}, {0.001});
  Tensor& zero_points = store.make<int64_t>({1, 1}, {0});
  Tensor& codes = store.make_empty(ScalarType::kChar, {1, 3});
  ASSERT_TRUE(is_ok(quantize_per_token_int8(input, scales, zero_points, codes)));
  const auto expected = static_cast<int8_t>(std::nearbyint((1.0f / 0.001f) * stored));
  EXPECT_EQ(values_of<int8_t>(codes), (std::vector<int8_t>{expected, 0, static_cast<int8_t>(-expected)}));

  Tensor& ints = store.make<int32_t>({1, 3}, {1, 2, 3});
  Tensor& scale_out = store.make_empty(ScalarType::kDouble, {1, 1});
  Tensor& zero_point_out = store.make_empty(ScalarType::kLong, {1, 1});
  Args refused;
  refused.tensor(ints).dtype(ScalarType::kChar).tensor(scale_out).tensor(zero_point_out);
  std::vector<Tensor*> outs = {&scale_out, &zero_point_out};
  refused.tensors(outs);
  EXPECT_TRUE(fails_with(run_kernel("quantized_decomposed::choose_qparams_per_token_asymmetric.out", refused),
                         {"float32, float16 or bfloat16"}));
}

TEST(ChooseQparams, PerTensorSpansRangeIncludingZero) {
  TensorStore store;
  Tensor& input = store.make<float>({4}, {0.5f, 1.5f, 2.0f, 1.0f});
  Tensor& scale = store.make_empty(ScalarType::kDouble, {1});
  Tensor& zero_point = store.make_empty(ScalarType::kLong, {1});
  Args args;
  args.tensor(input).integer(0).integer(255).real(1e-7).dtype(ScalarType::kByte).tensor(scale).tensor(zero_point);
  std::vector<Tensor*> outs = {&scale, &zero_point};
  args.tensors(outs);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::choose_qparams.Tensor_out", args)));
  EXPECT_DOUBLE_EQ(values_of<double>(scale)[0], 2.0 / 255.0);  // range widened to [0, 2]
  EXPECT_EQ(values_of<int64_t>(zero_point)[0], 0);

  Tensor& zeros = store.make<float>({2}, {0.0f, 0.0f});
  Args degenerate;
  degenerate.tensor(zeros)
      .integer(-128)
      .integer(127)
      .real(1e-7)
      .dtype(ScalarType::kChar)
      .tensor(scale)
      .tensor(zero_point);
  degenerate.tensors(outs);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::choose_qparams.Tensor_out", degenerate)));
  EXPECT_DOUBLE_EQ(values_of<double>(scale)[0], 0.1);
}

TEST(Embedding4bit, HighNibbleFirstOffsetByEightWithGroupsAndZeroPoints) {
  TensorStore store;
  // 2 embeddings of width 4 (2 bytes each), 2 groups of 2.
  Tensor& weight = store.make<uint8_t>({2, 2}, {0x1F, 0x80, 0x08, 0xF0});
  Tensor& scales = store.make<float>({2, 2}, {1.0f, 0.5f, 2.0f, 0.25f});
  Tensor& zero_points = store.make<float>({2, 2}, {0.0f, 1.0f, -1.0f, 0.0f});
  Tensor& indices = store.make<int64_t>({3}, {1, 0, 1});
  Tensor& out = store.make_empty(ScalarType::kFloat, {3, 4});
  Args args;
  args.tensor(weight).tensor(scales).tensor(zero_points).integer(-8).integer(7).tensor(indices).tensor(out).same_as(6);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::embedding_4bit.out", args)));
  // row 0 nibbles 1,15,8,0 -> -7,7,0,-8; groups: (-7-0)*1, (7-0)*1, (0-1)*0.5, (-8-1)*0.5
  // row 1 nibbles 0,8,15,0 -> -8,0,7,-8; groups: (-8+1)*2, (0+1)*2, 7*0.25, -8*0.25
  const std::vector<float> row0 = {-7.0f, 7.0f, -0.5f, -4.5f};
  const std::vector<float> row1 = {-14.0f, 2.0f, 1.75f, -2.0f};
  std::vector<float> expected = row1;
  expected.insert(expected.end(), row0.begin(), row0.end());
  expected.insert(expected.end(), row1.begin(), row1.end());
  EXPECT_EQ(values_of<float>(out), expected);
}

TEST(Embedding2bit, LowBitsFirstOffsetByTwo) {
  TensorStore store;
  Tensor& weight = store.make<uint8_t>({1, 1}, {0xE4});  // fields 0,1,2,3 from the low bits
  Tensor& scales = store.make<float>({1}, {3.0f});
  Tensor& indices = store.make<int64_t>({1, 1}, {0});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 4});
  Args args;
  args.tensor(weight).tensor(scales).none().integer(-2).integer(1).tensor(indices).tensor(out).same_as(6);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::embedding_2bit.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-6.0f, -3.0f, 0.0f, 3.0f}));
}

TEST(EmbeddingByte, Bfloat16ScalesHalfOutputAndIndexChecks) {
  TensorStore store;
  Tensor& weight = store.make<int8_t>({3, 2}, {-4, 4, 10, -10, 1, 2});
  Tensor& scales = store.make_empty(ScalarType::kBFloat16, {3});
  auto* scale_bits = static_cast<uint16_t*>(scales.data());
  scale_bits[0] = float_to_bfloat16(0.5f);
  scale_bits[1] = float_to_bfloat16(0.25f);
  scale_bits[2] = float_to_bfloat16(2.0f);
  Tensor& indices = store.make<int32_t>({2}, {2, 1});
  Tensor& out = store.make_empty(ScalarType::kHalf, {2, 2});
  Args args;
  args.tensor(weight)
      .tensor(scales)
      .none()
      .integer(-128)
      .integer(127)
      .tensor(indices)
      .dtype(ScalarType::kHalf)
      .tensor(out)
      .same_as(7);
  ASSERT_TRUE(is_ok(run_kernel("quantized_decomposed::embedding_byte.dtype_out", args)));
  std::vector<float> got;
  for (int16_t bits : values_of<int16_t>(out)) got.push_back(half_to_float(static_cast<uint16_t>(bits)));
  EXPECT_EQ(got, (std::vector<float>{2.0f, 4.0f, 2.5f, -2.5f}));

  Tensor& bad = store.make<int64_t>({2}, {0, 3});
  Tensor& out32 = store.make_empty(ScalarType::kFloat, {2, 2});
  Args refused;
  refused.tensor(weight).tensor(scales).none().integer(-128).integer(127).tensor(bad).tensor(out32).same_as(6);
  EXPECT_TRUE(fails_with(run_kernel("quantized_decomposed::embedding_byte.out", refused), {"index 3", "3 embeddings"}));
}

}  // namespace
}  // namespace etna::kernel_test
