// Delegates whose external inputs and outputs are declared bf16 or fp16.
// The linked XNNPACK has no bf16 tensors and computes fp16 only in Convert,
// so the delegate computes such a graph in fp32: the caller's 16-bit tensor
// is widened exactly on the way in and the fp32 result rounded to nearest
// even on the way out, as the exporter's fp32 graph between its conversions
// computes. NaN, the infinities, -0 and subnormals come through as PyTorch
// gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend_test_support.h"
#include "core/bf16.h"
#include "kernels/real_elements.h"

namespace etna::test {
namespace {

using fbx::NodeUnion;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

uint16_t to_bits(ScalarType dtype, float value) {
  return dtype == ScalarType::kBFloat16 ? float_to_bfloat16(value) : kernels::float_to_half(value);
}
float from_bits(ScalarType dtype, uint16_t bits) {
  return dtype == ScalarType::kBFloat16 ? bfloat16_to_float(bits) : kernels::half_to_float(bits);
}
fbx::Datatype datatype_of(ScalarType dtype) {
  return dtype == ScalarType::kBFloat16 ? fbx::Datatype::bf16 : fbx::Datatype::fp16;
}

// y = x + c with x and y external, of `dtype`, and c an fp32 constant.
std::vector<uint8_t> add_payload(PayloadBuilder& b, ScalarType dtype, const std::vector<float>& c) {
  const auto n = static_cast<uint32_t>(c.size());
  const uint32_t x = b.tensor(datatype_of(dtype), {n}, 0, 1);
  const uint32_t constant = b.constant({n}, c);
  const uint32_t y = b.tensor(datatype_of(dtype), {n}, 1, 2);
  b.binary(NodeUnion::XNNAdd, x, constant, y);
  return b.finish(PayloadBuilder::Layout::kConstantRegion, 2);
}

// Runs y = x + c on 16-bit bit patterns; returns y's bits.
std::vector<uint16_t> run_add(ScalarType dtype, const std::vector<uint16_t>& x_bits, const std::vector<float>& c) {
  PayloadBuilder b;
  const auto payload = add_payload(b, dtype, c);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  EXPECT_TRUE(delegate) << delegate.error().message;
  if (!delegate) return {};
  const auto n = static_cast<int64_t>(c.size());
  // No slack: the widened copy, not the caller's buffer, is what XNNPACK reads.
  LocalTensor x(dtype, {n}, 0);
  LocalTensor y(dtype, {n});
  std::memcpy(x.tensor().data(), x_bits.data(), x_bits.size() * sizeof(uint16_t));
  Status ran = run_delegate(**delegate, {&x, &y});
  EXPECT_TRUE(ran) << ran.error().message;
  const auto* out = y.tensor().data_as<const uint16_t>();
  return std::vector<uint16_t>(out, out + n);
}

TEST(Xnnpack16BitExternals, ComputeInFp32BetweenAnExactWideningAndOneRounding) {
  for (ScalarType dtype : {ScalarType::kBFloat16, ScalarType::kHalf}) {
    const bool brain = dtype == ScalarType::kBFloat16;
    // The smallest subnormal of each format, and a value whose sum with 2^-9
    // (bf16: 2^-9 * 3, a tie between 1 + 2^-7 and 1 + 2^-6) rounds to even.
    const float tiny = brain ? bfloat16_to_float(0x0001) : kernels::half_to_float(0x0001);
    const float tie = brain ? 1.0f + 0x1p-7f : 1.0f + 0x1p-10f;
    const float half_step = brain ? 0x1p-8f : 0x1p-11f;
    const float largest = brain ? bfloat16_to_float(0x7F7F) : 65504.0f;
    const std::vector<float> x = {kNaN, kInf, -kInf, -0.0f, tiny, tie, largest, 3.0f};
    const std::vector<float> c = {1.0f, -1.0f, 5.0f, -0.0f, tiny, half_step, largest, -0.0f};
    std::vector<uint16_t> x_bits;
    for (float v : x) x_bits.push_back(to_bits(dtype, v));
    const auto y = run_add(dtype, x_bits, c);
    ASSERT_EQ(y.size(), x.size());
    const char* name = brain ? "bf16" : "fp16";
    EXPECT_TRUE(std::isnan(from_bits(dtype, y[0]))) << name;
    EXPECT_EQ(from_bits(dtype, y[1]), kInf) << name;
    EXPECT_EQ(from_bits(dtype, y[2]), -kInf) << name;
    EXPECT_EQ(y[3], 0x8000) << name << ": -0 + -0 keeps the sign";
    EXPECT_EQ(from_bits(dtype, y[4]), 2 * tiny) << name << ": subnormals are kept, not flushed";
    // tie + half a step: exactly between two neighbours, rounded to the even one (1 + 2 steps).
    EXPECT_EQ(from_bits(dtype, y[5]), 1.0f + 4 * half_step) << name;
    EXPECT_EQ(from_bits(dtype, y[6]), kInf) << name << ": twice the largest overflows";
    EXPECT_EQ(y[7], to_bits(dtype, 3.0f)) << name;
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = from_bits(dtype, to_bits(dtype, from_bits(dtype, x_bits[i]) + c[i]));
      if (std::isnan(expected)) continue;
      EXPECT_EQ(y[i], to_bits(dtype, expected)) << name << " element " << i;
    }
  }
}

TEST(Xnnpack16BitExternals, OtherDtypesAreRefusedNamingTheArgument) {
  PayloadBuilder b;
  const auto payload = add_payload(b, ScalarType::kBFloat16, {1.0f, 2.0f});
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor x(ScalarType::kFloat, {2});
  LocalTensor y(ScalarType::kBFloat16, {2});
  Status ran = run_delegate(**delegate, {&x, &y});
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(ran.error().message.find("arg 0 (input value 0 (bf16[2], computed in fp32))"), std::string::npos)
      << ran.error().message;
  EXPECT_NE(ran.error().message.find("has dtype float32, expected bf16 data"), std::string::npos)
      << ran.error().message;
}

TEST(Xnnpack16BitExternals, ABf16ConvertIsUnsupportedByName) {
  // The linked XNNPACK converts fp32 to and from fp16, never bf16.
  PayloadBuilder b;
  const uint32_t x = b.tensor(fbx::Datatype::bf16, {4}, 0, 1);
  const uint32_t y = b.output({4}, 1);
  b.unary(NodeUnion::XNNConvert, x, y);
  const auto payload = b.finish(PayloadBuilder::Layout::kConstantRegion, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_FALSE(delegate);
  EXPECT_EQ(delegate.error().code, ErrorCode::kUnsupportedOperator);
  EXPECT_NE(delegate.error().message.find("conversion from bf16 to fp32 is not supported"), std::string::npos)
      << delegate.error().message;
}

TEST(Xnnpack16BitExternals, Fp16BesideAConvertStaysXnnpacksOwn) {
  // fp16 -> fp32 is a Convert the linked XNNPACK runs: the value keeps its datatype.
  PayloadBuilder b;
  const uint32_t x = b.tensor(fbx::Datatype::fp16, {3}, 0, 1);
  const uint32_t y = b.output({3}, 1);
  b.unary(NodeUnion::XNNConvert, x, y);
  const auto payload = b.finish(PayloadBuilder::Layout::kConstantRegion, 2);
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  ASSERT_TRUE(delegate) << delegate.error().message;
  LocalTensor in(ScalarType::kHalf, {3});
  LocalTensor out(ScalarType::kFloat, {3});
  const uint16_t bits[] = {0x3C00, 0x8000, 0x0001};  // 1, -0, 2^-24
  std::memcpy(in.tensor().data(), bits, sizeof bits);
  Status ran = run_delegate(**delegate, {&in, &out});
  ASSERT_TRUE(ran) << ran.error().message;
  const auto values = out.to_vector();
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_TRUE(std::signbit(values[1]));
  EXPECT_EQ(values[2], 0x1p-24f);
}

}  // namespace
}  // namespace etna::test
