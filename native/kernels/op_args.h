// Reading a kernel call's arguments: typed access to its slots, checks whose
// messages name the operator and argument, and the argument interpretations
// several kernels share. Kernels only report errors; they never throw or
// abort.
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
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/kernel_shape.h"
#include "kernels/scalar.h"

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

// An `int[]?` argument. (A plain struct: std::optional<std::vector> trips a
// false -Wmaybe-uninitialized in g++ 12 release builds.)
struct OptionalIntList {
  bool present = false;
  std::vector<int64_t> items;
};

// "Tensor", "Int", "IntList", ... for messages.
const char* kind_name(EValue::Kind kind);

// The arguments of one kernel call, read with messages that name the
// operator (the called kernel's registered name) and the argument.
class OpArgs {
 public:
  explicit OpArgs(KernelArgs args) : args_(args) {}

  std::string_view name() const { return args_.kernel ? args_.kernel->name : std::string_view("kernel"); }
  size_t count() const { return args_.size(); }
  // The call's thread pool (null: the calling thread alone), see core/parallel.h.
  pthreadpool_t pool() const { return args_.pool; }

  // For variadic kernels (registered with arity -1); the executor checks the
  // count of the others before they run.
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
  // The value in a slot, of any kind.
  Result<EValue*> value(size_t index, std::string_view arg) const;
  // Makes the return slot `index` the same value as self (argument 0), as an
  // in-place operator's result is self.
  Status return_self(size_t index) const;

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
  Error kind_error(size_t index, std::string_view arg, const char* expected, const EValue& got) const;

  KernelArgs args_;
};

// The operands of an elementwise operator with one tensor operand.
struct UnaryOperands {
  Tensor* self = nullptr;
  Tensor* out = nullptr;
};

// The dtypes a unary operator's tensors may have.
enum class UnaryDtypes {
  kElement,    // the supported dtypes, float16 and bfloat16 (which compute in float)
  kSupported,  // the supported dtypes only
};

// Reads self (argument 0, through its strides) and out (argument out_index),
// checking that both have `dtypes`.
Result<UnaryOperands> read_unary(const OpArgs& op, size_t out_index, UnaryDtypes dtypes = UnaryDtypes::kElement);

// The dims listed in `dims` (wrapped, no duplicates) as a mask, for reductions.
// An empty list means every dim.
Result<std::array<bool, kMaxTensorRank>> reduction_mask(const OpArgs& op, const std::vector<int64_t>& dims, size_t rank,
                                                        std::string_view arg);

// A shape from an IntList argument: every size >= 0 and the element count
// representable; at most one -1 (inferred from `numel` when given).
Result<Shape> shape_from_sizes(const OpArgs& op, const std::vector<int64_t>& sizes, std::string_view arg,
                               std::optional<int64_t> numel_for_inference);

}  // namespace etna::kernels
