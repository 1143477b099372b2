// What every kernel needs: typed access to its argument slots with messages
// that name the operator and argument, shapes, Scalars, dtype promotion, and
// output preparation. Kernels only report errors; they never throw or abort.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/evalue.h"
#include "core/kernel.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/element_access.h"

#define ETNA_KERNEL_CONCAT_INNER(a, b) a##b
#define ETNA_KERNEL_CONCAT(a, b) ETNA_KERNEL_CONCAT_INNER(a, b)
// Declares `decl` from the value of a Result, or returns its error.
#define ETNA_KERNEL_ASSIGN(decl, expr) \
  ETNA_KERNEL_ASSIGN_IMPL(ETNA_KERNEL_CONCAT(etna_kernel_result_, __LINE__), decl, expr)
#define ETNA_KERNEL_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.error();          \
  decl = std::move(tmp.value())

namespace etna::kernels {

// A tensor shape held by value (rank <= kMaxTensorRank).
struct Shape : BasicShape<int64_t, kMaxTensorRank> {
  static Shape of(const Tensor& tensor);
};

// Strides of a row-major tensor of this shape (a size-0 dim counts as 1).
std::array<int64_t, kMaxTensorRank> row_major_strides(const Shape& shape);

// True when the tensor's strides are those of a row-major tensor of its
// shape (dims of size 1 may have any stride), so flat indexing is valid.
bool is_row_major(const Tensor& tensor);

// An operator argument of schema type Scalar (Int, Double or Bool).
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

// dtype categories and promotion, for the dtypes kernels compute with.
// Computed on directly: uint8, int8, int16, int32, int64, float32, float64, bool.
bool is_supported_dtype(ScalarType type);
// The supported dtypes plus float16 and bfloat16, which kernels read and
// write through conversion to float (visit_element_dtype).
bool is_element_dtype(ScalarType type);
// float16, bfloat16, float32, float64 (PyTorch's is_floating_point).
bool is_floating_dtype(ScalarType type);
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

// An `int[]?` argument. (A plain struct: std::optional<std::vector> trips a
// false -Wmaybe-uninitialized in g++ 12 release builds.)
struct OptionalIntList {
  bool present = false;
  std::vector<int64_t> items;
};

// "Tensor", "Int", "IntList", ... for messages.
const char* kind_name(EValue::Kind kind);

// The arguments of one kernel call together with the operator's name, so
// every accessor and check can say which operator and argument were wrong.
class OpArgs {
 public:
  OpArgs(std::string_view op_name, KernelArgs args) : name_(op_name), args_(args) {}

  std::string_view name() const { return name_; }
  size_t count() const { return args_.size(); }
  EValue& slot(size_t index) const { return args_[index]; }
  // The call's thread pool (null: the calling thread alone), see core/parallel.h.
  pthreadpool_t pool() const { return args_.pool; }

  Status expect_count(size_t expected) const;

  // Error builders. `program_error`: the program itself is inconsistent
  // (argument kinds, dtypes); `input_error`: the values are out of range for
  // this operator (shapes, indices); `unsupported`: valid but not
  // implemented here.
  Error program_error(std::string message) const;
  Error input_error(std::string message) const;
  Error unsupported(std::string message) const;
  // "argument 2 (alpha)"
  static std::string arg_label(size_t index, std::string_view arg);

  // Slot accessors; each checks the index and the value kind.
  Result<Tensor*> tensor(size_t index, std::string_view arg) const;
  // A tensor that is read: data present for its bytes, row-major layout.
  Result<Tensor*> input(size_t index, std::string_view arg) const;
  // A tensor that is read through its strides (any dim order).
  Result<Tensor*> strided_input(size_t index, std::string_view arg) const;
  // None -> nullptr; otherwise as input().
  Result<Tensor*> optional_input(size_t index, std::string_view arg) const;
  // A tensor that is written; prepare_output() checks its data once resized.
  Result<Tensor*> output(size_t index, std::string_view arg) const;

  Result<int64_t> int_arg(size_t index, std::string_view arg) const;
  Result<std::optional<int64_t>> optional_int_arg(size_t index, std::string_view arg) const;
  Result<bool> bool_arg(size_t index, std::string_view arg) const;
  // A `float` schema argument: Double, or Int.
  Result<double> double_arg(size_t index, std::string_view arg) const;
  Result<Scalar> scalar_arg(size_t index, std::string_view arg) const;
  Result<std::optional<Scalar>> optional_scalar_arg(size_t index, std::string_view arg) const;
  Result<std::vector<int64_t>> int_list_arg(size_t index, std::string_view arg) const;
  Result<OptionalIntList> optional_int_list_arg(size_t index, std::string_view arg) const;
  Result<std::optional<ScalarType>> optional_dtype_arg(size_t index, std::string_view arg) const;
  // An optional memory_format Int: contiguous 0, preserve 1, channels_last 2,
  // channels_last_3d 3. Kernels write whatever layout out already has.
  Status check_memory_format_arg(size_t index, std::string_view arg) const;
  Result<std::optional<std::string_view>> optional_string_arg(size_t index, std::string_view arg) const;
  // TensorList items (never null).
  Result<std::vector<Tensor*>> tensor_list_arg(size_t index, std::string_view arg) const;
  // OptionalTensorList items, nullptr for None.
  Result<std::vector<Tensor*>> optional_tensor_list_arg(size_t index, std::string_view arg) const;
  // The slot of a primitive op's result: Int, Double, Bool or None (never a
  // tensor or list, which the caller could not have meant to overwrite).
  Result<EValue*> scalar_result_slot(size_t index, std::string_view arg) const;

  // Checks with messages.
  Status check_readable(const Tensor& tensor, std::string_view arg) const;
  Status expect_dtype(const Tensor& tensor, std::string_view arg, ScalarType expected) const;
  Status expect_supported_dtype(const Tensor& tensor, std::string_view arg) const;
  // A supported dtype or float16 / bfloat16.
  Status expect_element_dtype(const Tensor& tensor, std::string_view arg) const;
  // float32 or float64 (kernels that compute on the stored elements): other
  // floats are UNSUPPORTED_OPERATOR, other dtypes INVALID_PROGRAM.
  Status expect_floating(const Tensor& tensor, std::string_view arg) const;
  // Any floating dtype, float16 and bfloat16 included.
  Status expect_any_floating(const Tensor& tensor, std::string_view arg) const;
  Status expect_rank(const Tensor& tensor, std::string_view arg, size_t rank) const;
  // Copying src into dst is possible: equal dtypes, or two element dtypes.
  Status expect_convertible(const Tensor& src, std::string_view src_name, const Tensor& dst,
                            std::string_view dst_name) const;
  // Result dtype `computed` must be castable to the out tensor's dtype.
  Status expect_castable(ScalarType computed, const Tensor& out, std::string_view arg = "out") const;
  // Wraps a possibly negative dim into [0, rank); a rank-0 tensor accepts
  // -1 and 0 (PyTorch's rule).
  Result<size_t> wrap_dim(int64_t dim, size_t rank, std::string_view arg) const;
  // Resizes `out` to `shape` and checks that its data can hold the result.
  // With `row_major`, also requires a row-major layout.
  Status prepare_output(Tensor& out, const Shape& shape, std::string_view arg = "out", bool row_major = true) const;
  // The broadcast shape of two shapes, or an error naming both.
  Result<Shape> broadcast_shapes(const Shape& a, std::string_view a_name, const Shape& b,
                                 std::string_view b_name) const;

 private:
  Result<EValue*> value(size_t index, std::string_view arg) const;
  Error kind_error(size_t index, std::string_view arg, const char* expected, const EValue& got) const;

  std::string_view name_;
  KernelArgs args_;
};

// The dims listed in `dims` (wrapped, no duplicates) as a mask, for reductions.
// An empty list means every dim.
Result<std::array<bool, kMaxTensorRank>> reduction_mask(const OpArgs& op, const std::vector<int64_t>& dims, size_t rank,
                                                        std::string_view arg);

// A shape from an IntList argument: every size >= 0 and the element count
// representable; at most one -1 (inferred from `numel` when given).
Result<Shape> shape_from_sizes(const OpArgs& op, const std::vector<int64_t>& sizes, std::string_view arg,
                               std::optional<int64_t> numel_for_inference);

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
