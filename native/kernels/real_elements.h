// Reading and writing floating-point elements whose dtype is known only at
// run time, including the two 16-bit formats (float16, bfloat16: core/bf16.h)
// that quantized and LLM programs use for scales and activations. Values
// travel as float: every format here converts to float exactly except
// float64, which rounds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "core/bf16.h"
#include "core/dtype.h"
#include "core/status.h"

namespace etna::kernels {

inline float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  uint32_t out;
  if (exponent == 0x1Fu) {
    out = sign | 0x7F800000u | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    out = sign;  // signed zero
  } else {
    // Subnormal: mantissa * 2^-24, exact in float.
    out = float_bits(std::ldexp(static_cast<float>(mantissa), -24)) | sign;
  }
  return float_from_bits(out);
}

// Rounds to nearest, ties to even; overflow becomes infinity, NaN stays NaN.
inline uint16_t float_to_half(float value) {
  const uint16_t sign = static_cast<uint16_t>((float_bits(value) >> 16) & 0x8000u);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return static_cast<uint16_t>(sign | 0x7E00u);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past the largest half
  if (magnitude < 6.103515625e-05f) {
    // Subnormal or zero: the value in units of 2^-24, rounded to even.
    const float units = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(units));
  }
  const uint32_t magnitude_bits = float_bits(magnitude);
  const uint32_t exponent = (magnitude_bits >> 23) - 112u;
  uint32_t half = (exponent << 10) | ((magnitude_bits >> 13) & 0x3FFu);
  const uint32_t rest = magnitude_bits & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | half);
}

// float32, float64, float16 or bfloat16.
inline bool is_real_dtype(ScalarType type) {
  return type == ScalarType::kFloat || type == ScalarType::kDouble || type == ScalarType::kHalf ||
         type == ScalarType::kBFloat16;
}

// Element `index` of a buffer of `type` (a real dtype) as float.
inline float load_real(ScalarType type, const void* base, int64_t index) {
  switch (type) {
    case ScalarType::kDouble: return static_cast<float>(static_cast<const double*>(base)[index]);
    case ScalarType::kHalf: return half_to_float(static_cast<const uint16_t*>(base)[index]);
    case ScalarType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(base)[index]);
    default: return static_cast<const float*>(base)[index];
  }
}

inline void store_real(ScalarType type, void* base, int64_t index, float value) {
  switch (type) {
    case ScalarType::kDouble: static_cast<double*>(base)[index] = value; break;
    case ScalarType::kHalf: static_cast<uint16_t*>(base)[index] = float_to_half(value); break;
    case ScalarType::kBFloat16: static_cast<uint16_t*>(base)[index] = float_to_bfloat16(value); break;
    default: static_cast<float*>(base)[index] = value; break;
  }
}

// Room for one row of `width` elements of a float16 or bfloat16 tensor
// widened to float, for kernels that run 16-bit input on their float path;
// null for other dtypes, which they read in place.
inline Result<std::unique_ptr<float[]>> widening_row(ScalarType type, int64_t width) {
  std::unique_ptr<float[]> row;
  if (type != ScalarType::kHalf && type != ScalarType::kBFloat16)
    return Result<std::unique_ptr<float[]>>(std::move(row));
  row.reset(new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(1, width))]);
  if (!row) return make_error(ErrorCode::kInternal, "out of memory for a widened row of " + std::to_string(width));
  return Result<std::unique_ptr<float[]>>(std::move(row));
}

}  // namespace etna::kernels
