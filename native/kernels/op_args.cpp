#include "kernels/op_args.h"

#include <cstdint>

#include "kernels/dtype_promotion.h"

namespace etna::kernels {

const char* kind_name(EValue::Kind kind) {
  switch (kind) {
    case EValue::Kind::kNone: return "None";
    case EValue::Kind::kInt: return "Int";
    case EValue::Kind::kDouble: return "Double";
    case EValue::Kind::kBool: return "Bool";
    case EValue::Kind::kString: return "String";
    case EValue::Kind::kTensor: return "Tensor";
    case EValue::Kind::kIntList: return "IntList";
    case EValue::Kind::kDoubleList: return "DoubleList";
    case EValue::Kind::kBoolList: return "BoolList";
    case EValue::Kind::kTensorList: return "TensorList";
    case EValue::Kind::kOptionalTensorList: return "OptionalTensorList";
  }
  return "unknown";
}

Status OpArgs::expect_count(size_t expected) const {
  if (count() == expected) return Status::ok();
  return program_error("expected " + std::to_string(expected) + " arguments (including the return slot), got " +
                       std::to_string(count()));
}

Error OpArgs::program_error(std::string message) const {
  return make_error(ErrorCode::kInvalidProgram, std::string(name()) + ": " + message);
}

Error OpArgs::input_error(std::string message) const {
  return make_error(ErrorCode::kInvalidInput, std::string(name()) + ": " + message);
}

Error OpArgs::unsupported(std::string message) const {
  return make_error(ErrorCode::kUnsupportedOperator, std::string(name()) + ": " + message);
}

std::string OpArgs::arg_label(size_t index, std::string_view arg) {
  return "argument " + std::to_string(index) + " (" + std::string(arg) + ")";
}

Result<EValue*> OpArgs::value(size_t index, std::string_view arg) const {
  if (index >= count()) {
    return program_error(arg_label(index, arg) + " is missing: the call has " + std::to_string(count()) + " arguments");
  }
  return &args_[index];
}

Error OpArgs::kind_error(size_t index, std::string_view arg, const char* expected, const EValue& got) const {
  return program_error(arg_label(index, arg) + ": expected " + expected + ", got " + kind_name(got.kind()));
}

Result<Tensor*> OpArgs::tensor(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (!v->is_tensor()) return kind_error(index, arg, "a Tensor", *v);
  return &v->to_tensor();
}

Result<Tensor*> OpArgs::strided_input(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(Tensor * t, tensor(index, arg));
  ETNA_TRY(check_readable(*t, arg_label(index, arg)));
  return t;
}

Result<Tensor*> OpArgs::input(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(Tensor * t, strided_input(index, arg));
  if (!is_row_major(*t)) {
    return unsupported(arg_label(index, arg) + " " + t->describe() +
                       " is not in row-major (contiguous) dim order, which this kernel requires");
  }
  return t;
}

Result<Tensor*> OpArgs::optional_input(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_none()) return static_cast<Tensor*>(nullptr);
  return input(index, arg);
}

Result<Tensor*> OpArgs::output(size_t index, std::string_view arg) const { return tensor(index, arg); }

Result<int64_t> OpArgs::int_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (!v->is_int()) return kind_error(index, arg, "an Int", *v);
  return v->to_int();
}

Result<std::optional<int64_t>> OpArgs::optional_int_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_none()) return std::optional<int64_t>();
  if (!v->is_int()) return kind_error(index, arg, "an Int or None", *v);
  return std::optional<int64_t>(v->to_int());
}

Result<bool> OpArgs::bool_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (!v->is_bool()) return kind_error(index, arg, "a Bool", *v);
  return v->to_bool();
}

Result<double> OpArgs::double_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_double()) return v->to_double();
  if (v->is_int()) return static_cast<double>(v->to_int());
  return kind_error(index, arg, "a Double", *v);
}

Result<Scalar> OpArgs::scalar_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_int()) return Scalar::from_int(v->to_int());
  if (v->is_double()) return Scalar::from_double(v->to_double());
  if (v->is_bool()) return Scalar::from_bool(v->to_bool());
  return kind_error(index, arg, "a Scalar (Int, Double or Bool)", *v);
}

Result<std::optional<Scalar>> OpArgs::optional_scalar_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_none()) return std::optional<Scalar>();
  ETNA_KERNEL_ASSIGN(Scalar s, scalar_arg(index, arg));
  return std::optional<Scalar>(s);
}

Result<std::vector<int64_t>> OpArgs::int_list_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->kind() != EValue::Kind::kIntList) return kind_error(index, arg, "an IntList", *v);
  std::vector<int64_t> items(v->list_size());
  for (size_t i = 0; i < items.size(); ++i) items[i] = v->int_item(i);
  return items;
}

Result<OptionalIntList> OpArgs::optional_int_list_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  OptionalIntList list;
  if (v->is_none()) return list;
  ETNA_KERNEL_ASSIGN(list.items, int_list_arg(index, arg));
  list.present = true;
  return list;
}

Result<std::optional<ScalarType>> OpArgs::optional_dtype_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> code, optional_int_arg(index, arg));
  if (!code) return std::optional<ScalarType>();
  if (*code < 0 || *code > 127 || !etna::element_size(static_cast<int>(*code))) {
    return program_error(arg_label(index, arg) + ": " + std::to_string(*code) + " is not a dtype code");
  }
  return std::optional<ScalarType>(static_cast<ScalarType>(*code));
}

Status OpArgs::check_memory_format_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> format, optional_int_arg(index, arg));
  if (format && (*format < 0 || *format > 3)) {
    return program_error(arg_label(index, arg) + ": unknown memory format " + std::to_string(*format));
  }
  return Status::ok();
}

Result<std::optional<std::string_view>> OpArgs::optional_string_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->is_none()) return std::optional<std::string_view>();
  if (v->kind() != EValue::Kind::kString) return kind_error(index, arg, "a String or None", *v);
  return std::optional<std::string_view>(v->to_string());
}

Result<std::vector<Tensor*>> OpArgs::tensor_list_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->kind() != EValue::Kind::kTensorList) return kind_error(index, arg, "a TensorList", *v);
  std::vector<Tensor*> items(v->list_size());
  for (size_t i = 0; i < items.size(); ++i) {
    // optional_tensor_item() checks the referenced slot instead of trusting it.
    items[i] = v->optional_tensor_item(i);
    if (!items[i]) {
      return program_error(arg_label(index, arg) + ": item " + std::to_string(i) + " is not a Tensor");
    }
  }
  return items;
}

Result<std::vector<Tensor*>> OpArgs::optional_tensor_list_arg(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (v->kind() != EValue::Kind::kOptionalTensorList && v->kind() != EValue::Kind::kTensorList) {
    return kind_error(index, arg, "an OptionalTensorList", *v);
  }
  std::vector<Tensor*> items(v->list_size());
  for (size_t i = 0; i < items.size(); ++i) items[i] = v->optional_tensor_item(i);
  return items;
}

Status OpArgs::return_self(size_t index) const {
  ETNA_KERNEL_ASSIGN(EValue * self, value(0, "self"));
  ETNA_KERNEL_ASSIGN(EValue * result, value(index, "return"));
  if (result != self) *result = *self;
  return Status::ok();
}

Result<EValue*> OpArgs::scalar_result_slot(size_t index, std::string_view arg) const {
  ETNA_KERNEL_ASSIGN(EValue * v, value(index, arg));
  if (!v->is_none() && !v->is_scalar()) return kind_error(index, arg, "an Int, Double, Bool or None slot", *v);
  return v;
}

Status OpArgs::check_readable(const Tensor& tensor, std::string_view arg) const {
  const auto size = etna::element_size(static_cast<int>(tensor.dtype()));
  if (!size || *size == 0) {
    return program_error(std::string(arg) + " has unknown dtype code " +
                         std::to_string(static_cast<int>(tensor.dtype())));
  }
  if (tensor.numel() == 0) return Status::ok();
  if (tensor.data() == nullptr) return input_error(std::string(arg) + " " + tensor.describe() + " has no data");
  if (tensor.nbytes() > tensor.capacity()) {
    return input_error(std::string(arg) + " " + tensor.describe() + " needs " + std::to_string(tensor.nbytes()) +
                       " bytes but its memory holds " + std::to_string(tensor.capacity()));
  }
  const size_t alignment = *size < 8 ? *size : 8;
  if (reinterpret_cast<uintptr_t>(tensor.data()) % alignment != 0) {
    return input_error(std::string(arg) + " " + tensor.describe() + " data is not aligned to " +
                       std::to_string(alignment) + " bytes");
  }
  return Status::ok();
}

Status OpArgs::expect_dtype(const Tensor& tensor, std::string_view arg, ScalarType expected) const {
  if (tensor.dtype() == expected) return Status::ok();
  return program_error(std::string(arg) + " must have dtype " + std::string(dtype_name(expected)) + ", got " +
                       tensor.describe());
}

Status OpArgs::expect_supported_dtype(const Tensor& tensor, std::string_view arg) const {
  if (is_supported_dtype(tensor.dtype())) return Status::ok();
  return unsupported(std::string(arg) + " has dtype " + std::string(dtype_name(tensor.dtype())) +
                     "; supported: uint8, int8, int16, int32, int64, float32, float64, bool");
}

Status OpArgs::expect_element_dtype(const Tensor& tensor, std::string_view arg) const {
  if (is_element_dtype(tensor.dtype())) return Status::ok();
  return unsupported(std::string(arg) + " has dtype " + std::string(dtype_name(tensor.dtype())) +
                     "; supported: uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, bool");
}

Status OpArgs::expect_floating(const Tensor& tensor, std::string_view arg) const {
  if (visit_floating_dtype(tensor.dtype(), [](auto) {})) return Status::ok();
  if (is_floating_dtype(tensor.dtype())) {
    // A valid dtype for the operator, just not one this kernel computes in.
    return unsupported(std::string(arg) + " " + tensor.describe() + ": this kernel takes float32 or float64 only");
  }
  return program_error(std::string(arg) + " must be float32 or float64, got " + tensor.describe());
}

Status OpArgs::expect_any_floating(const Tensor& tensor, std::string_view arg) const {
  if (is_floating_dtype(tensor.dtype())) return Status::ok();
  return program_error(std::string(arg) + " must be floating point (float16, bfloat16, float32 or float64), got " +
                       tensor.describe());
}

Status OpArgs::expect_rank(const Tensor& tensor, std::string_view arg, size_t rank) const {
  if (tensor.rank() == rank) return Status::ok();
  return input_error(std::string(arg) + " must have rank " + std::to_string(rank) + ", got " + tensor.describe());
}

Status OpArgs::expect_convertible(const Tensor& src, std::string_view src_name, const Tensor& dst,
                                  std::string_view dst_name) const {
  if (src.dtype() == dst.dtype()) return Status::ok();
  if (is_element_dtype(src.dtype()) && is_element_dtype(dst.dtype())) return Status::ok();
  return unsupported("cannot convert " + std::string(src_name) + " " + src.describe() + " to " + std::string(dst_name) +
                     " dtype " + std::string(dtype_name(dst.dtype())));
}

Status OpArgs::expect_castable(ScalarType computed, const Tensor& out, std::string_view arg) const {
  if (can_cast_dtype(computed, out.dtype())) return Status::ok();
  return program_error("result dtype " + std::string(dtype_name(computed)) + " cannot be cast to " + std::string(arg) +
                       " dtype " + std::string(dtype_name(out.dtype())));
}

Result<size_t> OpArgs::wrap_dim(int64_t dim, size_t rank, std::string_view arg) const {
  const int64_t extent = rank == 0 ? 1 : static_cast<int64_t>(rank);
  if (dim < -extent || dim >= extent) {
    return input_error(std::string(arg) + " " + std::to_string(dim) + " is out of range for rank " +
                       std::to_string(rank) + " (expected " + std::to_string(-extent) + ".." +
                       std::to_string(extent - 1) + ")");
  }
  return static_cast<size_t>(dim < 0 ? dim + extent : dim);
}

Status OpArgs::prepare_output(Tensor& out, const Shape& shape, std::string_view arg, bool row_major) const {
  if (out.rank() != shape.rank) {
    return input_error(std::string(arg) + " " + out.describe() + " has rank " + std::to_string(out.rank()) +
                       " but the result has shape " + shape.to_string());
  }
  Status resized = out.resize(shape.rank, shape.data());
  if (!resized) {
    return input_error(std::string(arg) + " cannot take the result shape " + shape.to_string() + ": " +
                       resized.error().message);
  }
  ETNA_TRY(check_readable(out, arg));
  if (row_major && !is_row_major(out)) {
    return unsupported(std::string(arg) + " " + out.describe() +
                       " is not in row-major (contiguous) dim order, which this kernel requires");
  }
  return Status::ok();
}

Result<Shape> OpArgs::broadcast_shapes(const Shape& a, std::string_view a_name, const Shape& b,
                                       std::string_view b_name) const {
  Shape result;
  result.rank = a.rank > b.rank ? a.rank : b.rank;
  for (size_t i = 0; i < result.rank; ++i) {
    // Align from the right.
    const int64_t da = i < a.rank ? a[a.rank - 1 - i] : 1;
    const int64_t db = i < b.rank ? b[b.rank - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return input_error("cannot broadcast " + std::string(a_name) + " " + a.to_string() + " with " +
                         std::string(b_name) + " " + b.to_string());
    }
    result[result.rank - 1 - i] = da == 1 ? db : da;
  }
  return result;
}

Result<std::array<bool, kMaxTensorRank>> reduction_mask(const OpArgs& op, const std::vector<int64_t>& dims, size_t rank,
                                                        std::string_view arg) {
  std::array<bool, kMaxTensorRank> mask{};
  if (dims.empty()) {
    for (size_t d = 0; d < rank; ++d) mask[d] = true;
    return mask;
  }
  for (int64_t dim : dims) {
    ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, rank, arg));
    if (rank == 0) continue;
    if (mask[d]) return op.input_error(std::string(arg) + " lists dim " + std::to_string(d) + " more than once");
    mask[d] = true;
  }
  return mask;
}

Result<UnaryOperands> read_unary(const OpArgs& op, size_t out_index, UnaryDtypes dtypes) {
  UnaryOperands operands;
  ETNA_KERNEL_ASSIGN(operands.self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(operands.out, op.output(out_index, "out"));
  if (dtypes == UnaryDtypes::kElement) {
    ETNA_TRY(op.expect_element_dtype(*operands.self, "self"));
    ETNA_TRY(op.expect_element_dtype(*operands.out, "out"));
  } else {
    ETNA_TRY(op.expect_supported_dtype(*operands.self, "self"));
    ETNA_TRY(op.expect_supported_dtype(*operands.out, "out"));
  }
  return operands;
}

Result<Shape> shape_from_sizes(const OpArgs& op, const std::vector<int64_t>& sizes, std::string_view arg,
                               std::optional<int64_t> numel_for_inference) {
  if (sizes.size() > kMaxTensorRank) {
    return op.input_error(std::string(arg) + " has " + std::to_string(sizes.size()) + " sizes; the maximum rank is " +
                          std::to_string(kMaxTensorRank));
  }
  Shape shape;
  shape.rank = sizes.size();
  std::optional<size_t> inferred;
  uint64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    shape[i] = sizes[i];
    if (sizes[i] == -1 && numel_for_inference) {
      if (inferred) return op.input_error(std::string(arg) + " has more than one -1");
      inferred = i;
      continue;
    }
    if (sizes[i] < 0) {
      return op.input_error(std::string(arg) + " has negative size " + std::to_string(sizes[i]) + " at position " +
                            std::to_string(i));
    }
    if (__builtin_mul_overflow(known, static_cast<uint64_t>(sizes[i]), &known) ||
        known > static_cast<uint64_t>(INT64_MAX)) {
      return op.input_error(std::string(arg) + " describes more elements than fit in memory");
    }
  }
  if (inferred) {
    const auto numel = static_cast<uint64_t>(*numel_for_inference);
    if (known == 0 || numel % known != 0) {
      std::string sizes_text = "[";
      for (size_t i = 0; i < sizes.size(); ++i) sizes_text += (i ? ", " : "") + std::to_string(sizes[i]);
      return op.input_error(std::string(arg) + " " + sizes_text + "] cannot hold " + std::to_string(numel) +
                            " elements");
    }
    shape[*inferred] = static_cast<int64_t>(numel / known);
  }
  return shape;
}

}  // namespace etna::kernels
