// Runtime values of a method: the slots that instructions read and write.
// Lists are "boxed": they hold pointers to other slots, so a list observes
// later writes to those slots (symbolic sizes computed at run time).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "tensor.h"

namespace etna {

class EValue {
 public:
  enum class Kind : uint8_t {
    kNone,
    kInt,
    kDouble,
    kBool,
    kString,
    kTensor,
    kIntList,
    kDoubleList,
    kBoolList,
    kTensorList,
    kOptionalTensorList,
  };

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_double() const { return kind_ == Kind::kDouble; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  // Int, Double or Bool: what operator schemas call a Scalar.
  bool is_scalar() const { return is_int() || is_double() || is_bool(); }

  int64_t to_int() const { return int_; }
  double to_double() const { return double_; }
  bool to_bool() const { return bool_; }
  std::string_view to_string() const { return string_; }
  Tensor& to_tensor() const { return *tensor_; }
  // A Scalar argument as double / int64 whatever its kind.
  double scalar_as_double() const {
    return is_double() ? double_ : is_int() ? static_cast<double>(int_) : (bool_ ? 1.0 : 0.0);
  }
  int64_t scalar_as_int() const {
    return is_int() ? int_ : is_double() ? static_cast<int64_t>(double_) : (bool_ ? 1 : 0);
  }

  // Lists: element count and element access.
  size_t list_size() const { return list_size_; }
  int64_t int_item(size_t i) const { return int_items_[i]->int_; }
  double double_item(size_t i) const { return double_items_[i]; }
  bool bool_item(size_t i) const { return bool_items_[i]; }
  Tensor& tensor_item(size_t i) const { return *tensor_items_[i]->tensor_; }
  // OptionalTensorList element; nullptr for None.
  Tensor* optional_tensor_item(size_t i) const {
    const EValue* item = tensor_items_[i];
    return item && item->is_tensor() ? item->tensor_ : nullptr;
  }

  static EValue none() { return EValue(); }
  static EValue from_int(int64_t v) { return make(Kind::kInt, &EValue::int_, v); }
  static EValue from_double(double v) { return make(Kind::kDouble, &EValue::double_, v); }
  static EValue from_bool(bool v) { return make(Kind::kBool, &EValue::bool_, v); }
  static EValue from_string(std::string_view v) { return make(Kind::kString, &EValue::string_, v); }
  static EValue from_tensor(Tensor* t) { return make(Kind::kTensor, &EValue::tensor_, t); }
  static EValue from_int_list(EValue* const* items, size_t n) {
    return make(Kind::kIntList, &EValue::int_items_, items, n);
  }
  static EValue from_double_list(const double* items, size_t n) {
    return make(Kind::kDoubleList, &EValue::double_items_, items, n);
  }
  static EValue from_bool_list(const bool* items, size_t n) {
    return make(Kind::kBoolList, &EValue::bool_items_, items, n);
  }
  // items[i] points at a Tensor slot (TensorList) or at a Tensor / None slot,
  // or is nullptr for None (OptionalTensorList).
  static EValue from_tensor_list(EValue* const* items, size_t n, bool optional) {
    return make(optional ? Kind::kOptionalTensorList : Kind::kTensorList, &EValue::tensor_items_, items, n);
  }

 private:
  // A value of `kind` whose `field` holds v; list_size n (lists only).
  template <typename Field, typename V>
  static EValue make(Kind kind, Field EValue::*field, V v, size_t n = 0) {
    EValue e;
    e.kind_ = kind;
    e.*field = v;
    e.list_size_ = n;
    return e;
  }

  Kind kind_ = Kind::kNone;
  int64_t int_ = 0;
  double double_ = 0;
  bool bool_ = false;
  std::string_view string_;
  Tensor* tensor_ = nullptr;
  EValue* const* int_items_ = nullptr;
  const double* double_items_ = nullptr;
  const bool* bool_items_ = nullptr;
  EValue* const* tensor_items_ = nullptr;
  size_t list_size_ = 0;
};

}  // namespace etna
