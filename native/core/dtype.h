// Element types of the .pte format (ScalarType codes) and their sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace etna {

enum class ScalarType : int8_t {
  kByte = 0,    // uint8
  kChar = 1,    // int8
  kShort = 2,   // int16
  kInt = 3,     // int32
  kLong = 4,    // int64
  kHalf = 5,    // float16
  kFloat = 6,   // float32
  kDouble = 7,  // float64
  kComplexHalf = 8,
  kComplexFloat = 9,
  kComplexDouble = 10,
  kBool = 11,
  kQInt8 = 12,
  kQUInt8 = 13,
  kQInt32 = 14,
  kBFloat16 = 15,
  kQUInt4x2 = 16,
  kQUInt2x4 = 17,
  kBits1x8 = 18,
  kBits2x4 = 19,
  kBits4x2 = 20,
  kBits8 = 21,
  kBits16 = 22,
  kFloat8E5M2 = 23,
  kFloat8E4M3FN = 24,
  kFloat8E5M2FNUZ = 25,
  kFloat8E4M3FNUZ = 26,
  kUInt16 = 27,
  kUInt32 = 28,
  kUInt64 = 29,
};

// Bytes per element, or nullopt for a code the format does not define.
std::optional<size_t> element_size(int code);

// The ScalarType of a code the format defines; nullopt otherwise.
std::optional<ScalarType> scalar_type_from_code(int code);

// The name etna's API uses for a dtype ("float32", "int64", ...).
std::string_view dtype_name(ScalarType type);

// Parses an API dtype name; nullopt when unknown.
std::optional<ScalarType> dtype_from_name(std::string_view name);

}  // namespace etna
