// Primitive ops the exporter emits for symbolic shapes and views: scalar
// arithmetic and comparisons on Int/Double/Bool slots, tensor size queries,
// et_view, which makes an unplanned tensor alias another's data, and
// et_copy_index, which collects the results of a lowered loop.
// Results are written into the op's return slot.

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

// An Int/Double/Bool operand; Bool takes part as an Int (Python's rule).
struct Number {
  bool is_int = true;
  int64_t i = 0;
  double d = 0;
  double as_double() const { return is_int ? static_cast<double>(i) : d; }
};

Result<Number> number_arg(const OpArgs& op, size_t index, std::string_view name) {
  ETNA_KERNEL_ASSIGN(Scalar s, op.scalar_arg(index, name));
  Number n;
  n.is_int = !s.is_double();
  n.i = s.to<int64_t>();
  n.d = s.to<double>();
  return n;
}

Status write_int(const OpArgs& op, size_t index, int64_t value) {
  ETNA_KERNEL_ASSIGN(EValue * slot, op.scalar_result_slot(index, "out"));
  *slot = EValue::from_int(value);
  return Status::ok();
}

Status write_double(const OpArgs& op, size_t index, double value) {
  ETNA_KERNEL_ASSIGN(EValue * slot, op.scalar_result_slot(index, "out"));
  *slot = EValue::from_double(value);
  return Status::ok();
}

Status write_bool(const OpArgs& op, size_t index, bool value) {
  ETNA_KERNEL_ASSIGN(EValue * slot, op.scalar_result_slot(index, "out"));
  *slot = EValue::from_bool(value);
  return Status::ok();
}

Status write_number(const OpArgs& op, size_t index, const Number& value) {
  return value.is_int ? write_int(op, index, value.i) : write_double(op, index, value.d);
}

enum class Arith { kAdd, kSub, kMul, kTrueDiv, kFloorDiv, kMod, kMax, kMin };

// Python semantics: floor division and a modulo with the divisor's sign.
Result<Number> apply_arith(const OpArgs& op, Arith kind, const Number& a, const Number& b) {
  Number r;
  if (kind == Arith::kTrueDiv) {
    r.is_int = false;
    r.d = a.as_double() / b.as_double();
    return r;
  }
  if (a.is_int && b.is_int) {
    const int64_t x = a.i, y = b.i;
    switch (kind) {
      case Arith::kAdd: r.i = wrapping_add(x, y); break;
      case Arith::kSub: r.i = wrapping_sub(x, y); break;
      case Arith::kMul: r.i = wrapping_mul(x, y); break;
      case Arith::kMax: r.i = x > y ? x : y; break;
      case Arith::kMin: r.i = x < y ? x : y; break;
      case Arith::kFloorDiv:
      case Arith::kMod: {
        if (y == 0) return op.input_error("integer division by zero");
        if (y == -1) {
          // Avoids INT64_MIN / -1; the remainder is always 0.
          r.i = kind == Arith::kMod ? 0 : wrapping_neg(x);
          break;
        }
        int64_t quotient = x / y;
        int64_t remainder = x % y;
        if (remainder != 0 && ((remainder < 0) != (y < 0))) {
          quotient -= 1;
          remainder += y;
        }
        r.i = kind == Arith::kMod ? remainder : quotient;
        break;
      }
      case Arith::kTrueDiv: break;
    }
    return r;
  }
  const double x = a.as_double(), y = b.as_double();
  r.is_int = false;
  switch (kind) {
    case Arith::kAdd: r.d = x + y; break;
    case Arith::kSub: r.d = x - y; break;
    case Arith::kMul: r.d = x * y; break;
    case Arith::kMax: r.d = (std::isnan(x) || x > y) ? x : y; break;
    case Arith::kMin: r.d = (std::isnan(x) || x < y) ? x : y; break;
    case Arith::kFloorDiv: r.d = std::floor(x / y); break;
    case Arith::kMod: {
      double remainder = std::fmod(x, y);
      if (remainder != 0 && ((remainder < 0) != (y < 0))) remainder += y;
      r.d = remainder;
      break;
    }
    case Arith::kTrueDiv: break;
  }
  return r;
}

template <Arith kKind>
Status binary_arith(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Number a, number_arg(op, 0, "a"));
  ETNA_KERNEL_ASSIGN(Number b, number_arg(op, 1, "b"));
  ETNA_KERNEL_ASSIGN(Number result, apply_arith(op, kKind, a, b));
  return write_number(op, 2, result);
}

enum class Compare { kEq, kGt, kLt, kGe, kLe };

template <Compare kKind>
Status binary_compare(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Number a, number_arg(op, 0, "a"));
  ETNA_KERNEL_ASSIGN(Number b, number_arg(op, 1, "b"));
  auto compare = [](auto x, auto y) {
    switch (kKind) {
      case Compare::kEq: return x == y;
      case Compare::kGt: return x > y;
      case Compare::kLt: return x < y;
      case Compare::kGe: return x >= y;
      case Compare::kLe: return x <= y;
    }
    return false;
  };
  const bool result = a.is_int && b.is_int ? compare(a.i, b.i) : compare(a.as_double(), b.as_double());
  return write_bool(op, 2, result);
}

Status prim_neg(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Number a, number_arg(op, 0, "a"));
  return a.is_int ? write_int(op, 1, wrapping_neg(a.i)) : write_double(op, 1, -a.d);
}

Status prim_sym_float(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Number a, number_arg(op, 0, "a"));
  return write_double(op, 1, a.as_double());
}

// Double -> Int conversions (sym_int truncates; ceil/round/trunc as named).
template <typename Round>
Status to_int_kernel(KernelArgs args, Round round) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Number a, number_arg(op, 0, "a"));
  if (a.is_int) return write_int(op, 1, a.i);
  const double rounded = round(a.d);
  if (!std::isfinite(rounded) || rounded < -9.2233720368547758e18 || rounded >= 9.2233720368547758e18) {
    return op.input_error("cannot convert " + std::to_string(a.d) + " to an Int");
  }
  return write_int(op, 1, static_cast<int64_t>(rounded));
}

Status prim_sym_int(KernelArgs args) {
  return to_int_kernel(args, [](double v) { return std::trunc(v); });
}
Status prim_trunc(KernelArgs args) {
  return to_int_kernel(args, [](double v) { return std::trunc(v); });
}
Status prim_ceil(KernelArgs args) {
  return to_int_kernel(args, [](double v) { return std::ceil(v); });
}
Status prim_round(KernelArgs args) {
  // Python rounds halves to even, which is the default floating rounding mode.
  return to_int_kernel(args, [](double v) { return std::nearbyint(v); });
}

Status prim_sym_not(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(bool a, op.bool_arg(0, "a"));
  return write_bool(op, 1, !a);
}

// --- tensor queries and views --------------------------------------------------------

Status sym_size_int(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.tensor(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  if (self->rank() == 0) return op.input_error("a rank-0 tensor has no dims");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  return write_int(op, 2, self->size(d));
}

Status sym_numel(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.tensor(0, "self"));
  return write_int(op, 1, static_cast<int64_t>(self->numel()));
}

Status local_scalar_dense(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  if (self->numel() != 1) return op.input_error("self " + self->describe() + " must hold exactly one element");
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  if (self->dtype() == ScalarType::kBool) return write_bool(op, 1, load_element<bool>(self->data(), 0));
  if (is_floating_dtype(self->dtype())) return write_double(op, 1, reader_for<double>(self->dtype())(self->data(), 0));
  return write_int(op, 1, reader_for<int64_t>(self->dtype())(self->data(), 0));
}

Status et_view(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> sizes, op.int_list_arg(1, "size"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_KERNEL_ASSIGN(Shape shape, shape_from_sizes(op, sizes, "size", static_cast<int64_t>(self->numel())));
  if (shape.numel() != static_cast<int64_t>(self->numel())) {
    return op.input_error("size " + shape.to_string() + " does not match the " + std::to_string(self->numel()) +
                          " elements of self " + self->describe());
  }
  if (out == self) return op.program_error("out must be a different tensor than self");
  // Point out at self's bytes first, so the resize is checked against them.
  out->set_data(self->data(), self->capacity());
  return op.prepare_output(*out, shape);
}

// One iteration of a lowered map loop: copy_from becomes row `index` of
// copy_to, whose leading dim grows to index + 1 when it is shorter. The call
// has no return slot.
Status et_copy_index(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * copy_to, op.tensor(0, "copy_to"));
  ETNA_KERNEL_ASSIGN(Tensor * copy_from, op.input(1, "copy_from"));
  ETNA_KERNEL_ASSIGN(int64_t index, op.int_arg(2, "index"));
  if (copy_to == copy_from) return op.program_error("copy_to and copy_from must be different tensors");
  ETNA_TRY(op.expect_dtype(*copy_to, "copy_to", copy_from->dtype()));
  if (copy_to->rank() != copy_from->rank() + 1) {
    return op.input_error("copy_to " + copy_to->describe() + " must have one more dim than copy_from " +
                          copy_from->describe());
  }
  // Bounded so index + 1 rows of copy_from stay far from overflow.
  if (index < 0 || index >= (int64_t(1) << 31)) {
    return op.input_error("index " + std::to_string(index) + " must be in [0, 2^31)");
  }
  const bool grow = copy_to->size(0) <= index;
  Shape rows = Shape::of(*copy_to);
  rows[0] = grow ? index + 1 : copy_to->size(0);
  for (size_t d = 0; d < copy_from->rank(); ++d) {
    // Growing from an empty copy_to (index 0) adopts copy_from's shape.
    if (!(grow && index == 0) && copy_to->size(d + 1) != copy_from->size(d)) {
      return op.input_error("copy_from " + copy_from->describe() + " does not match the rows of copy_to " +
                            copy_to->describe());
    }
    rows[d + 1] = copy_from->size(d);
  }
  ETNA_TRY(op.prepare_output(*copy_to, rows, "copy_to"));
  const size_t row_bytes = copy_from->nbytes();
  if (row_bytes > 0) {
    std::memcpy(static_cast<uint8_t*>(copy_to->data()) + static_cast<size_t>(index) * row_bytes, copy_from->data(),
                row_bytes);
  }
  return Status::ok();
}

}  // namespace

void register_prim_kernels(KernelRegistry& registry) {
  registry.add({"executorch_prim::add.Scalar", 3, binary_arith<Arith::kAdd>});
  registry.add({"executorch_prim::sub.Scalar", 3, binary_arith<Arith::kSub>});
  registry.add({"executorch_prim::mul.Scalar", 3, binary_arith<Arith::kMul>});
  registry.add({"executorch_prim::truediv.Scalar", 3, binary_arith<Arith::kTrueDiv>});
  registry.add({"executorch_prim::floordiv.Scalar", 3, binary_arith<Arith::kFloorDiv>});
  registry.add({"executorch_prim::floordiv.int", 3, binary_arith<Arith::kFloorDiv>});
  registry.add({"executorch_prim::mod.Scalar", 3, binary_arith<Arith::kMod>});
  registry.add({"executorch_prim::mod.int", 3, binary_arith<Arith::kMod>});
  registry.add({"executorch_prim::sym_max.Scalar", 3, binary_arith<Arith::kMax>});
  registry.add({"executorch_prim::sym_min.Scalar", 3, binary_arith<Arith::kMin>});
  registry.add({"executorch_prim::eq.Scalar", 3, binary_compare<Compare::kEq>});
  registry.add({"executorch_prim::gt.Scalar", 3, binary_compare<Compare::kGt>});
  registry.add({"executorch_prim::lt.Scalar", 3, binary_compare<Compare::kLt>});
  registry.add({"executorch_prim::ge.Scalar", 3, binary_compare<Compare::kGe>});
  registry.add({"executorch_prim::le.Scalar", 3, binary_compare<Compare::kLe>});
  registry.add({"executorch_prim::neg.Scalar", 2, prim_neg});
  registry.add({"executorch_prim::sym_float.Scalar", 2, prim_sym_float});
  registry.add({"executorch_prim::sym_int.Scalar", 2, prim_sym_int});
  registry.add({"executorch_prim::trunc.Scalar", 2, prim_trunc});
  registry.add({"executorch_prim::ceil.Scalar", 2, prim_ceil});
  registry.add({"executorch_prim::round.Scalar", 2, prim_round});
  registry.add({"executorch_prim::sym_not.Scalar", 2, prim_sym_not});
  registry.add({"aten::sym_size.int", 3, sym_size_int});
  registry.add({"aten::sym_numel", 2, sym_numel});
  registry.add({"aten::_local_scalar_dense", 2, local_scalar_dense});
  registry.add({"executorch_prim::et_view.default", 3, et_view});
  registry.add({"executorch_prim::et_copy_index.tensor", 3, et_copy_index});
}

}  // namespace etna::kernels
