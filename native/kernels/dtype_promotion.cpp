#include "kernels/dtype_promotion.h"

#include "kernels/scalar.h"

namespace etna::kernels {

bool is_supported_dtype(ScalarType type) {
  return visit_real_dtype(type, [](auto) {});
}

bool is_element_dtype(ScalarType type) {
  return visit_element_dtype(type, [](auto) {});
}

bool is_floating_dtype(ScalarType type) {
  return type == ScalarType::kFloat || type == ScalarType::kDouble || type == ScalarType::kHalf ||
         type == ScalarType::kBFloat16;
}

bool is_16bit_float_dtype(ScalarType type) { return type == ScalarType::kHalf || type == ScalarType::kBFloat16; }

bool is_integral_dtype(ScalarType type, bool include_bool) {
  switch (type) {
    case ScalarType::kByte:
    case ScalarType::kChar:
    case ScalarType::kShort:
    case ScalarType::kInt:
    case ScalarType::kLong: return true;
    case ScalarType::kBool: return include_bool;
    default: return false;
  }
}

namespace {

int category(ScalarType type) {
  if (type == ScalarType::kBool) return 0;
  if (is_floating_dtype(type)) return 2;
  return 1;
}

}  // namespace

std::optional<ScalarType> promote_dtypes(ScalarType a, ScalarType b) {
  if (!is_element_dtype(a) || !is_element_dtype(b)) return std::nullopt;
  if (a == b) return a;
  if (a == ScalarType::kBool) return b;
  if (b == ScalarType::kBool) return a;
  if (is_floating_dtype(a) != is_floating_dtype(b)) return is_floating_dtype(a) ? a : b;
  if (is_floating_dtype(a)) {
    // Two different floats: float16 and bfloat16 meet in float32; otherwise the wider wins.
    return (a == ScalarType::kDouble || b == ScalarType::kDouble) ? ScalarType::kDouble : ScalarType::kFloat;
  }
  if (a == ScalarType::kByte || b == ScalarType::kByte) {
    const ScalarType is_signed = a == ScalarType::kByte ? b : a;
    return is_signed == ScalarType::kChar ? ScalarType::kShort : is_signed;
  }
  // Both signed: the wider one. Codes of signed ints grow with their width.
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

bool can_cast_dtype(ScalarType from, ScalarType to) {
  if (is_floating_dtype(from) && is_integral_dtype(to, true)) return false;
  if (from != ScalarType::kBool && to == ScalarType::kBool) return false;
  return true;
}

void ResultType::merge(std::optional<ScalarType>& into, ScalarType type, bool& unsupported) {
  if (!is_element_dtype(type)) {
    unsupported = true;
    return;
  }
  if (!into) {
    into = type;
    return;
  }
  into = promote_dtypes(*into, type);
}

void ResultType::add(const Tensor& tensor) {
  merge(tensor.rank() == 0 ? zero_dim_ : dimensioned_, tensor.dtype(), unsupported_);
}

void ResultType::add(const Scalar& scalar) { merge(scalar_, scalar.promotion_dtype(), unsupported_); }

std::optional<ScalarType> ResultType::get() const {
  if (unsupported_) return std::nullopt;
  auto combine = [](std::optional<ScalarType> higher, std::optional<ScalarType> lower) -> std::optional<ScalarType> {
    if (!higher) return lower;
    if (!lower) return higher;
    return category(*lower) > category(*higher) ? promote_dtypes(*higher, *lower) : higher;
  };
  return combine(combine(dimensioned_, zero_dim_), scalar_);
}

}  // namespace etna::kernels
