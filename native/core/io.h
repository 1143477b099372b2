// Values crossing a method's boundary: what callers pass in and get back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtype.h"

namespace etna {

// A caller's tensor: described, not owned. Planned inputs are copied from it;
// unplanned ones are used in place for the duration of one call.
struct TensorArg {
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

struct InputValue {
  enum class Kind { kNone, kInt, kDouble, kBool, kString, kTensor };
  Kind kind = Kind::kNone;
  int64_t int_value = 0;
  double double_value = 0;
  bool bool_value = false;
  std::string string_value;
  TensorArg tensor;
};

// Where one output's bytes go: a caller-owned buffer of `capacity` bytes.
struct OutputBuffer {
  void* data = nullptr;
  size_t capacity = 0;
};

struct OutputValue {
  enum class Kind { kNone, kInt, kDouble, kBool, kString, kTensor, kOther };
  Kind kind = Kind::kNone;
  int64_t int_value = 0;
  double double_value = 0;
  bool bool_value = false;
  std::string string_value;
  ScalarType dtype = ScalarType::kFloat;
  std::vector<int64_t> shape;
  size_t nbytes = 0;  // tensor bytes written into the OutputBuffer
};

}  // namespace etna
