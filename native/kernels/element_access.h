// Reading, writing and converting tensor elements whose dtype is only known
// at run time, and dispatching a generic lambda on a dtype.
//
// Conversions never invoke undefined behaviour: float -> integer saturates
// (NaN becomes 0), anything -> bool is "!= 0", and bool bytes are read as
// "non-zero" so arbitrary caller bytes cannot produce an invalid bool.
//
// float16 and bfloat16 elements are stored as Half and BFloat16, which have
// no arithmetic: they convert through float (exactly when widening, rounded
// to nearest even when narrowing), so kernels compute them in float and round
// each result once.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "kernels/real_elements.h"

namespace etna::kernels {

// Storage of one float16 / bfloat16 element (its bit pattern).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <typename T>
constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

inline float widen_to_float(Half value) { return half_to_float(value.bits); }
inline float widen_to_float(BFloat16 value) { return bfloat16_to_float(value.bits); }

template <typename T>
inline T narrow_from_float(float value) {
  static_assert(is_16bit_float_v<T>);
  if constexpr (std::is_same_v<T, Half>) {
    return Half{float_to_half(value)};
  } else {
    return BFloat16{float_to_bfloat16(value)};
  }
}

template <typename T>
struct TypeTag {
  using type = T;
};

// NaN test for any compute type: integers are never NaN.
template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

// The dtype whose elements are stored as T.
template <typename T>
constexpr ScalarType dtype_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return ScalarType::kByte;
  else if constexpr (std::is_same_v<T, int8_t>) return ScalarType::kChar;
  else if constexpr (std::is_same_v<T, int16_t>) return ScalarType::kShort;
  else if constexpr (std::is_same_v<T, int32_t>) return ScalarType::kInt;
  else if constexpr (std::is_same_v<T, int64_t>) return ScalarType::kLong;
  else if constexpr (std::is_same_v<T, float>) return ScalarType::kFloat;
  else if constexpr (std::is_same_v<T, double>) return ScalarType::kDouble;
  else if constexpr (std::is_same_v<T, bool>) return ScalarType::kBool;
  else if constexpr (std::is_same_v<T, Half>) return ScalarType::kHalf;
  else if constexpr (std::is_same_v<T, BFloat16>) return ScalarType::kBFloat16;
  else static_assert(sizeof(T) == 0, "no dtype stores this type");
}

// Value conversion with defined results for every input.
template <typename To, typename From>
inline To convert_value(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (is_16bit_float_v<From>) {
    return convert_value<To>(widen_to_float(value));
  } else if constexpr (is_16bit_float_v<To>) {
    // Wider types round to float first, as PyTorch's Half(float) does.
    return narrow_from_float<To>(convert_value<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_same_v<From, bool>) {
    return value ? To(1) : To(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(value)) return To(0);
    // The bounds round to at most 2^N, so values strictly between them convert
    // without overflow.
    constexpr From low = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From high = static_cast<From>(std::numeric_limits<To>::max());
    if (value <= low) return std::numeric_limits<To>::min();
    if (value >= high) return std::numeric_limits<To>::max();
    return static_cast<To>(value);
  } else {
    // Integer narrowing wraps modulo 2^N (what PyTorch does); float narrowing rounds.
    return static_cast<To>(value);
  }
}

// Element `index` of a buffer of T. Bools are read as bytes so that any byte
// value is a valid input.
template <typename T>
inline T load_element(const void* base, int64_t index) {
  if constexpr (std::is_same_v<T, bool>) {
    return static_cast<const uint8_t*>(base)[index] != 0;
  } else {
    return static_cast<const T*>(base)[index];
  }
}

template <typename T>
inline void store_element(void* base, int64_t index, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    static_cast<uint8_t*>(base)[index] = value ? 1 : 0;
  } else {
    static_cast<T*>(base)[index] = value;
  }
}

// Calls f(TypeTag<T>{}) for the integer and float dtypes kernels compute on
// directly (uint8, int8, int16, int32, int64, float32, float64: no bool).
// Returns false for others.
template <typename F>
inline bool visit_numeric_dtype(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kByte: f(TypeTag<uint8_t>{}); return true;
    case ScalarType::kChar: f(TypeTag<int8_t>{}); return true;
    case ScalarType::kShort: f(TypeTag<int16_t>{}); return true;
    case ScalarType::kInt: f(TypeTag<int32_t>{}); return true;
    case ScalarType::kLong: f(TypeTag<int64_t>{}); return true;
    case ScalarType::kFloat: f(TypeTag<float>{}); return true;
    case ScalarType::kDouble: f(TypeTag<double>{}); return true;
    default: return false;
  }
}

// As visit_numeric_dtype, plus bool: every dtype whose elements kernels
// compute on directly.
template <typename F>
inline bool visit_real_dtype(ScalarType type, F&& f) {
  if (type != ScalarType::kBool) return visit_numeric_dtype(type, std::forward<F>(f));
  f(TypeTag<bool>{});
  return true;
}

// The type an element stored as T is compared in: float for the 16-bit
// floats (widening is exact, so narrowing back is too), T otherwise.
template <typename T>
using value_type_t = std::conditional_t<is_16bit_float_v<T>, float, T>;

template <typename T>
inline value_type_t<T> load_value(const void* base, int64_t index) {
  return convert_value<value_type_t<T>>(load_element<T>(base, index));
}

template <typename T>
inline void store_value(void* base, int64_t index, value_type_t<T> value) {
  store_element<T>(base, index, convert_value<T>(value));
}

// As visit_real_dtype, plus float16 (Half) and bfloat16 (BFloat16): the
// dtypes elements can be read, written and converted in. Kernels reach the
// 16-bit floats through conversion (readers, writers, convert_value), never
// by computing on T.
template <typename F>
inline bool visit_element_dtype(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kHalf: f(TypeTag<Half>{}); return true;
    case ScalarType::kBFloat16: f(TypeTag<BFloat16>{}); return true;
    default: return visit_real_dtype(type, std::forward<F>(f));
  }
}

// Reads element `index` of a buffer of some dtype, converted to To.
template <typename To>
using ReadFn = To (*)(const void* base, int64_t index);
// Writes a From value, converted, into element `index` of a buffer.
template <typename From>
using WriteFn = void (*)(void* base, int64_t index, From value);

template <typename To, typename Stored>
To read_converted(const void* base, int64_t index) {
  return convert_value<To>(load_element<Stored>(base, index));
}

template <typename From, typename Stored>
void write_converted(void* base, int64_t index, From value) {
  store_element<Stored>(base, index, convert_value<Stored>(value));
}

// nullptr when the dtype is not one of the supported ones.
template <typename To>
ReadFn<To> reader_for(ScalarType type) {
  ReadFn<To> fn = nullptr;
  visit_element_dtype(type, [&](auto tag) { fn = &read_converted<To, typename decltype(tag)::type>; });
  return fn;
}

template <typename From>
WriteFn<From> writer_for(ScalarType type) {
  WriteFn<From> fn = nullptr;
  visit_element_dtype(type, [&](auto tag) { fn = &write_converted<From, typename decltype(tag)::type>; });
  return fn;
}

// Integer arithmetic that wraps instead of overflowing (PyTorch semantics for
// integer tensors, and no undefined behaviour); plain arithmetic otherwise.
template <typename T>
inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
inline T wrapping_sub(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}

template <typename T>
inline T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// Floats flip the sign bit (-(+0) is -0, as in PyTorch; 0 - (+0) would be +0).
template <typename T>
inline T wrapping_neg(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return -a;
  } else {
    return wrapping_sub(T(0), a);
  }
}

}  // namespace etna::kernels
