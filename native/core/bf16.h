// bfloat16, the high 16 bits of a float32: the runtime's one set of scalar
// conversions (vector kernels widen 8 or 16 at a time with the same shift).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace etna {

// A float32's bit pattern, and the float32 of one.
inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Exact: every bfloat16 is a float32.
inline float bfloat16_to_float(uint16_t bits) { return float_from_bits(static_cast<uint32_t>(bits) << 16); }

// Rounds to nearest, ties to even, as PyTorch does; overflow becomes
// infinity; NaN stays a (quiet) NaN of the same sign.
inline uint16_t float_to_bfloat16(float value) {
  uint32_t bits = float_bits(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The high half of the bits: rounds toward zero. Exact for a value that is a
// bfloat16 (is_bfloat16), and what converters that truncate produce.
inline uint16_t truncate_to_bfloat16(float value) { return static_cast<uint16_t>(float_bits(value) >> 16); }

// Whether `value` is a bfloat16 value: its low 16 bits are zero.
inline bool is_bfloat16(float value) { return (float_bits(value) & 0xFFFFu) == 0; }

}  // namespace etna
