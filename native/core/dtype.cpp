#include "dtype.h"

#include <array>

namespace etna {
namespace {

struct DtypeInfo {
  size_t size;  // 0 = code not defined
  std::string_view name;
};

constexpr std::array<DtypeInfo, 30> kDtypes = {{
    {1, "uint8"},           {1, "int8"},
    {2, "int16"},           {4, "int32"},
    {8, "int64"},           {2, "float16"},
    {4, "float32"},         {8, "float64"},
    {4, "complex32"},       {8, "complex64"},
    {16, "complex128"},     {1, "bool"},
    {1, "qint8"},           {1, "quint8"},
    {4, "qint32"},          {2, "bfloat16"},
    {1, "quint4x2"},        {1, "quint2x4"},
    {1, "bits1x8"},         {1, "bits2x4"},
    {1, "bits4x2"},         {1, "bits8"},
    {2, "bits16"},          {1, "float8_e5m2"},
    {1, "float8_e4m3fn"},   {1, "float8_e5m2fnuz"},
    {1, "float8_e4m3fnuz"}, {2, "uint16"},
    {4, "uint32"},          {8, "uint64"},
}};

}  // namespace

std::optional<size_t> element_size(int code) {
  if (code < 0 || code >= static_cast<int>(kDtypes.size())) return std::nullopt;
  return kDtypes[static_cast<size_t>(code)].size;
}

std::optional<ScalarType> scalar_type_from_code(int code) {
  if (!element_size(code)) return std::nullopt;
  return static_cast<ScalarType>(code);
}

std::string_view dtype_name(ScalarType type) {
  const int code = static_cast<int>(type);
  if (code < 0 || code >= static_cast<int>(kDtypes.size())) return "unknown";
  return kDtypes[static_cast<size_t>(code)].name;
}

std::optional<ScalarType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kDtypes.size(); ++i) {
    if (kDtypes[i].name == name) return static_cast<ScalarType>(i);
  }
  return std::nullopt;
}

}  // namespace etna
