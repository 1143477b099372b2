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
  static EValue from_int(int64_t v) {
    EValue e;
    e.kind_ = Kind::kInt;
    e.int_ = v;
    return e;
  }
  static EValue from_double(double v) {
    EValue e;
    e.kind_ = Kind::kDouble;
    e.double_ = v;
    return e;
  }
  static EValue from_bool(bool v) {
    EValue e;
    e.kind_ = Kind::kBool;
    e.bool_ = v;
    return e;
  }
  static EValue from_string(std::string_view v) {
    EValue e;
    e.kind_ = Kind::kString;
    e.string_ = v;
    return e;
  }
  static EValue from_tensor(Tensor* t) {
    EValue e;
    e.kind_ = Kind::kTensor;
    e.tensor_ = t;
    return e;
  }
  static EValue from_int_list(EValue* const* items, size_t n) {
    EValue e;
    e.kind_ = Kind::kIntList;
    e.int_items_ = items;
    e.list_size_ = n;
    return e;
  }
  static EValue from_double_list(const double* items, size_t n) {
    EValue e;
    e.kind_ = Kind::kDoubleList;
    e.double_items_ = items;
    e.list_size_ = n;
    return e;
  }
  static EValue from_bool_list(const bool* items, size_t n) {
    EValue e;
    e.kind_ = Kind::kBoolList;
    e.bool_items_ = items;
    e.list_size_ = n;
    return e;
  }
  // items[i] points at a Tensor slot (TensorList) or at a Tensor / None slot,
  // or is nullptr for None (OptionalTensorList).
  static EValue from_tensor_list(EValue* const* items, size_t n, bool optional) {
    EValue e;
    e.kind_ = optional ? Kind::kOptionalTensorList : Kind::kTensorList;
    e.tensor_items_ = items;
    e.list_size_ = n;
    return e;
  }

 private:
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
