// An operator argument of schema type Scalar: an Int, Double or Bool that
// kernels convert to the type they compute in.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kernels/element_access.h"

namespace etna::kernels {

class Scalar {
 public:
  enum class Kind : uint8_t { kBool, kInt, kDouble };

  static Scalar from_bool(bool v);
  static Scalar from_int(int64_t v);
  static Scalar from_double(double v);

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_double() const { return kind_ == Kind::kDouble; }

  // The value converted to T with the rules of convert_value.
  template <typename T>
  T to() const {
    switch (kind_) {
      case Kind::kBool: return convert_value<T>(bool_);
      case Kind::kInt: return convert_value<T>(int_);
      case Kind::kDouble: break;
    }
    return convert_value<T>(double_);
  }
  // The dtype a Scalar takes part in type promotion with: bool, int64 or the
  // default float dtype (float32).
  ScalarType promotion_dtype() const;
  // True when the value converts to `type` without overflow or truncation of
  // a float into an integer dtype.
  bool fits(ScalarType type) const;
  // "Int(3)", "Double(0.5)", "Bool(true)"
  std::string describe() const;

 private:
  Kind kind_ = Kind::kInt;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0;
};

}  // namespace etna::kernels
