#include "kernels/scalar.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "kernels/dtype_promotion.h"

namespace etna::kernels {

Scalar Scalar::from_bool(bool v) {
  Scalar s;
  s.kind_ = Kind::kBool;
  s.bool_ = v;
  return s;
}

Scalar Scalar::from_int(int64_t v) {
  Scalar s;
  s.kind_ = Kind::kInt;
  s.int_ = v;
  return s;
}

Scalar Scalar::from_double(double v) {
  Scalar s;
  s.kind_ = Kind::kDouble;
  s.double_ = v;
  return s;
}

ScalarType Scalar::promotion_dtype() const {
  switch (kind_) {
    case Kind::kBool: return ScalarType::kBool;
    case Kind::kInt: return ScalarType::kLong;
    case Kind::kDouble: break;
  }
  return ScalarType::kFloat;
}

namespace {

template <typename T>
bool int_fits(int64_t v) {
  return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         (v < 0 || static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
}

template <typename T>
bool double_fits_integer(double v) {
  // Truncation toward zero is allowed (PyTorch casts); overflow is not.
  if (!std::isfinite(v)) return false;
  const double truncated = std::trunc(v);
  return truncated >= static_cast<double>(std::numeric_limits<T>::min()) &&
         truncated < static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
}

}  // namespace

bool Scalar::fits(ScalarType type) const {
  if (type == ScalarType::kBool || type == ScalarType::kDouble) return true;
  // The largest finite value of each narrower float dtype.
  double float_max = 0;
  if (type == ScalarType::kFloat) float_max = static_cast<double>(FLT_MAX);
  if (type == ScalarType::kHalf) float_max = 65504.0;
  if (type == ScalarType::kBFloat16) float_max = static_cast<double>(bfloat16_to_float(0x7F7Fu));
  if (float_max > 0) {
    if (is_double()) return !std::isfinite(double_) || std::fabs(double_) <= float_max;
    return !is_int() || std::fabs(static_cast<double>(int_)) <= float_max;
  }
  if (is_bool()) return is_supported_dtype(type);
  bool fits = false;
  visit_real_dtype(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      fits = is_int() ? int_fits<T>(int_) : double_fits_integer<T>(double_);
    }
  });
  return fits;
}

std::string Scalar::describe() const {
  switch (kind_) {
    case Kind::kBool: return bool_ ? "Bool(true)" : "Bool(false)";
    case Kind::kInt: return "Int(" + std::to_string(int_) + ")";
    case Kind::kDouble: break;
  }
  char text[48];
  std::snprintf(text, sizeof(text), "Double(%.17g)", double_);
  return text;
}

}  // namespace etna::kernels
