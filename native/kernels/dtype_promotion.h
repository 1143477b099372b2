// dtype categories and PyTorch's type promotion over the dtypes kernels
// compute with, and the dispatch from a result dtype to the type a kernel
// computes it in.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/element_access.h"

namespace etna::kernels {

class Scalar;

// Computed on directly: uint8, int8, int16, int32, int64, float32, float64, bool.
bool is_supported_dtype(ScalarType type);
// The supported dtypes plus float16 and bfloat16, which kernels read and
// write through conversion to float (visit_element_dtype).
bool is_element_dtype(ScalarType type);
// float16, bfloat16, float32, float64 (PyTorch's is_floating_point).
bool is_floating_dtype(ScalarType type);
// float16 and bfloat16, which kernels compute in float.
bool is_16bit_float_dtype(ScalarType type);
bool is_integral_dtype(ScalarType type, bool include_bool);
// PyTorch's promote_types over the element dtypes (float16 with bfloat16
// gives float32); nullopt when either dtype is not an element dtype.
std::optional<ScalarType> promote_dtypes(ScalarType a, ScalarType b);
// PyTorch's can_cast: no floating -> integral, no non-bool -> bool.
bool can_cast_dtype(ScalarType from, ScalarType to);

// PyTorch's result_type: dimensioned tensors outrank zero-dim tensors, which
// outrank Scalars; a lower-ranked operand only matters when its category
// (bool < integral < floating) is higher.
class ResultType {
 public:
  void add(const Tensor& tensor);
  void add(const Scalar& scalar);
  // nullopt when nothing was added or a dtype is unsupported.
  std::optional<ScalarType> get() const;

 private:
  static void merge(std::optional<ScalarType>& into, ScalarType type, bool& unsupported);
  std::optional<ScalarType> dimensioned_;
  std::optional<ScalarType> zero_dim_;
  std::optional<ScalarType> scalar_;
  bool unsupported_ = false;
};

// Calls f(TypeTag<C>{}) with the type used to compute a result of dtype
// `type`: int64 for bool and integer dtypes, double for float64 and float
// for the other floats (float16 and bfloat16 compute in float and round
// once when stored, as ExecuTorch's portable kernels do).
template <typename F>
inline bool visit_compute_type(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kHalf:
    case ScalarType::kBFloat16:
    case ScalarType::kFloat: f(TypeTag<float>{}); return true;
    case ScalarType::kDouble: f(TypeTag<double>{}); return true;
    case ScalarType::kByte:
    case ScalarType::kChar:
    case ScalarType::kShort:
    case ScalarType::kInt:
    case ScalarType::kLong:
    case ScalarType::kBool: f(TypeTag<int64_t>{}); return true;
    default: return false;
  }
}

// Calls f(TypeTag<T>{}) for float32 and float64 only.
template <typename F>
inline bool visit_floating_dtype(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kFloat: f(TypeTag<float>{}); return true;
    case ScalarType::kDouble: f(TypeTag<double>{}); return true;
    default: return false;
  }
}

}  // namespace etna::kernels
