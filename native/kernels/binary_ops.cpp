// Elementwise operators with two or three operands: arithmetic, comparisons,
// logical and bitwise operators, remainder, maximum/minimum, where, masked_fill and pow. Operands broadcast; the result
// dtype follows PyTorch's type promotion and is converted to the out tensor's dtype.

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

// The second operand of a binary operator: a tensor or a Scalar.
struct Operand {
  const Tensor* tensor = nullptr;
  Scalar scalar;
  std::string_view name;
};

Result<Operand> read_operand(const OpArgs& op, size_t index, std::string_view name, bool is_tensor) {
  Operand operand;
  operand.name = name;
  if (is_tensor) {
    ETNA_KERNEL_ASSIGN(operand.tensor, op.strided_input(index, name));
  } else {
    ETNA_KERNEL_ASSIGN(operand.scalar, op.scalar_arg(index, name));
  }
  return operand;
}

Result<ScalarType> operands_result_type(const OpArgs& op, const Tensor& self, const Operand& other) {
  ResultType result;
  result.add(self);
  if (other.tensor) result.add(*other.tensor);
  else result.add(other.scalar);
  if (auto type = result.get()) return *type;
  std::string message = "unsupported dtypes: self " + std::string(dtype_name(self.dtype()));
  if (other.tensor) message += ", " + std::string(other.name) + " " + std::string(dtype_name(other.tensor->dtype()));
  return op.unsupported(message +
                        " (supported: uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, bool)");
}

// The arguments [self, other, out] of an operator with no others, and the
// dtype self and other promote to.
struct BinaryCall {
  Tensor* self = nullptr;
  Operand other;
  Tensor* out = nullptr;
  ScalarType result = ScalarType::kFloat;
};

Result<BinaryCall> read_binary_call(const OpArgs& op, std::string_view other_name, bool other_is_tensor) {
  BinaryCall call;
  ETNA_KERNEL_ASSIGN(call.self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(call.other, read_operand(op, 1, other_name, other_is_tensor));
  ETNA_KERNEL_ASSIGN(call.out, op.output(2, "out"));
  ETNA_KERNEL_ASSIGN(call.result, operands_result_type(op, *call.self, call.other));
  return call;
}

// Shapes the output: the broadcast of self and other (or self's shape).
Status prepare_binary_output(const OpArgs& op, const Tensor& self, const Operand& other, Tensor& out) {
  Shape shape = Shape::of(self);
  if (other.tensor) {
    ETNA_KERNEL_ASSIGN(shape, op.broadcast_shapes(shape, "self", Shape::of(*other.tensor), other.name));
  }
  ETNA_TRY(op.expect_element_dtype(out, "out"));
  return op.prepare_output(out, shape, "out", /*row_major=*/false);
}

// Applies f(a, b) in compute type C to self and other, writing out.
template <typename C, typename R, typename F>
void apply_binary(const Tensor& self, const Operand& other, Tensor& out, F f) {
  if (other.tensor) {
    map_elements<C, R, 2>({&self, other.tensor}, out, f);
  } else {
    const C b = other.scalar.to<C>();
    map_elements<C, R, 1>({&self}, out, [f, b](C a) { return f(a, b); });
  }
}

// --- add, sub, rsub, mul ---------------------------------------------------

enum class Arith { kAdd, kSub, kReverseSub, kMul };

Status arithmetic(const OpArgs& op, bool other_is_tensor, Arith kind, bool has_alpha) {
  const size_t out_index = has_alpha ? 3 : 2;
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Operand other, read_operand(op, 1, "other", other_is_tensor));
  Scalar alpha = Scalar::from_int(1);
  if (has_alpha) {
    ETNA_KERNEL_ASSIGN(alpha, op.scalar_arg(2, "alpha"));
  }
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(out_index, "out"));
  ETNA_KERNEL_ASSIGN(ScalarType result, operands_result_type(op, *self, other));
  if (result == ScalarType::kBool && (kind == Arith::kSub || kind == Arith::kReverseSub)) {
    return op.program_error("subtracting bool tensors is not supported (use logical_xor)");
  }
  if (has_alpha) {
    if (is_integral_dtype(result, true) && alpha.is_double()) {
      return op.program_error("alpha " + alpha.describe() + " must be an integer for " +
                              std::string(dtype_name(result)) + " operands");
    }
    if (alpha.is_bool() && result != ScalarType::kBool) {
      return op.program_error("a Bool alpha is only allowed for bool operands");
    }
  }
  ETNA_TRY(op.expect_castable(result, *out));
  ETNA_TRY(prepare_binary_output(op, *self, other, *out));
  visit_compute_type(result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    const C a_scale = alpha.to<C>();
    switch (kind) {
      case Arith::kAdd:
        apply_binary<C, C>(*self, other, *out,
                           [a_scale](C a, C b) { return wrapping_add(a, wrapping_mul(a_scale, b)); });
        break;
      case Arith::kSub:
        apply_binary<C, C>(*self, other, *out,
                           [a_scale](C a, C b) { return wrapping_sub(a, wrapping_mul(a_scale, b)); });
        break;
      case Arith::kReverseSub:
        apply_binary<C, C>(*self, other, *out,
                           [a_scale](C a, C b) { return wrapping_sub(b, wrapping_mul(a_scale, a)); });
        break;
      case Arith::kMul: apply_binary<C, C>(*self, other, *out, [](C a, C b) { return wrapping_mul(a, b); }); break;
    }
  });
  return Status::ok();
}

// --- div ----------------------------------------------------------------------

enum class Rounding { kNone, kTrunc, kFloor };

template <typename C>
C floor_divide_floating(C a, C b) {
  if (b == 0) return a / b;  // inf or nan, like PyTorch
  const C remainder = std::fmod(a, b);
  C quotient = (a - remainder) / b;
  if (remainder != 0 && ((b < 0) != (remainder < 0))) quotient -= 1;
  if (quotient == 0) return std::copysign(C(0), a / b);
  C floored = std::floor(quotient);
  if (quotient - floored > C(0.5)) floored += 1;
  return floored;
}

// Integer quotient rounded toward zero or down; division by zero sets the flag.
int64_t divide_integers(int64_t a, int64_t b, Rounding rounding, bool& divided_by_zero) {
  if (b == 0) {
    divided_by_zero = true;
    return 0;
  }
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;  // wraps, as two's complement would
  int64_t quotient = a / b;
  if (rounding == Rounding::kFloor && a % b != 0 && ((a < 0) != (b < 0))) quotient -= 1;
  return quotient;
}

Status divide(const OpArgs& op, bool other_is_tensor, bool has_mode) {
  const size_t out_index = has_mode ? 3 : 2;
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Operand other, read_operand(op, 1, "other", other_is_tensor));
  Rounding rounding = Rounding::kNone;
  if (has_mode) {
    ETNA_KERNEL_ASSIGN(std::optional<std::string_view> mode, op.optional_string_arg(2, "rounding_mode"));
    if (mode && *mode == "trunc") rounding = Rounding::kTrunc;
    else if (mode && *mode == "floor") rounding = Rounding::kFloor;
    else if (mode) {
      return op.program_error("rounding_mode must be None, 'trunc' or 'floor', got '" + std::string(*mode) + "'");
    }
  }
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(out_index, "out"));
  ETNA_KERNEL_ASSIGN(ScalarType common, operands_result_type(op, *self, other));
  // True division of integers produces the default float dtype.
  const ScalarType result = rounding == Rounding::kNone && !is_floating_dtype(common) ? ScalarType::kFloat : common;
  ETNA_TRY(op.expect_castable(result, *out));
  ETNA_TRY(prepare_binary_output(op, *self, other, *out));
  bool divided_by_zero = false;
  if (rounding == Rounding::kNone) {
    const bool wide = result == ScalarType::kDouble || out->dtype() == ScalarType::kDouble;
    visit_floating_dtype(wide ? ScalarType::kDouble : ScalarType::kFloat, [&](auto tag) {
      using C = typename decltype(tag)::type;
      apply_binary<C, C>(*self, other, *out, [](C a, C b) { return a / b; });
    });
  } else if (is_floating_dtype(result)) {
    visit_compute_type(result, [&](auto tag) {
      using C = typename decltype(tag)::type;
      if (rounding == Rounding::kTrunc) {
        apply_binary<C, C>(*self, other, *out, [](C a, C b) { return std::trunc(a / b); });
      } else {
        apply_binary<C, C>(*self, other, *out, [](C a, C b) { return floor_divide_floating(a, b); });
      }
    });
  } else {
    apply_binary<int64_t, int64_t>(*self, other, *out, [rounding, &divided_by_zero](int64_t a, int64_t b) {
      return divide_integers(a, b, rounding, divided_by_zero);
    });
  }
  if (divided_by_zero) return op.input_error("integer division by zero");
  return Status::ok();
}

// --- remainder ---------------------------------------------------------------------

// PyTorch's remainder: the sign of the divisor. Floats take fmod's result and
// add b when it is nonzero and its sign differs from b's, so NaN and a zero
// divisor give NaN, -0 stays -0, and a finite a over an infinite b of the
// other sign gives that infinity.
template <typename C>
C remainder_floating(C a, C b) {
  C mod = std::fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

int64_t remainder_integers(int64_t a, int64_t b, bool& divided_by_zero) {
  if (b == 0) {
    divided_by_zero = true;
    return 0;
  }
  if (b == -1) return 0;  // also where a % b would overflow
  int64_t mod = a % b;
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

Status remainder(const OpArgs& op, bool other_is_tensor) {
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "other", other_is_tensor));
  if (call.result == ScalarType::kBool) return op.program_error("remainder is not defined for bool operands");
  ETNA_TRY(op.expect_castable(call.result, *call.out));
  ETNA_TRY(prepare_binary_output(op, *call.self, call.other, *call.out));
  if (is_floating_dtype(call.result)) {
    visit_compute_type(call.result, [&](auto tag) {
      using C = typename decltype(tag)::type;
      apply_binary<C, C>(*call.self, call.other, *call.out, [](C a, C b) { return remainder_floating(a, b); });
    });
    return Status::ok();
  }
  bool divided_by_zero = false;
  apply_binary<int64_t, int64_t>(*call.self, call.other, *call.out, [&divided_by_zero](int64_t a, int64_t b) {
    return remainder_integers(a, b, divided_by_zero);
  });
  if (divided_by_zero) return op.input_error("integer remainder by zero (ZeroDivisionError)");
  return Status::ok();
}

// --- comparisons -------------------------------------------------------------------

enum class Compare { kEq, kNe, kLt, kGt, kLe, kGe };

template <typename C>
bool compare_values(Compare kind, C a, C b) {
  switch (kind) {
    case Compare::kEq: return a == b;
    case Compare::kNe: return a != b;
    case Compare::kLt: return a < b;
    case Compare::kGt: return a > b;
    case Compare::kLe: return a <= b;
    case Compare::kGe: return a >= b;
  }
  return false;
}

Status comparison(const OpArgs& op, bool other_is_tensor, Compare kind) {
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "other", other_is_tensor));
  ETNA_TRY(prepare_binary_output(op, *call.self, call.other, *call.out));
  visit_compute_type(call.result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    apply_binary<C, bool>(*call.self, call.other, *call.out, [kind](C a, C b) { return compare_values(kind, a, b); });
  });
  return Status::ok();
}

// --- where, masked_fill, pow ---------------------------------------------------------

Status where_self_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * condition, op.strided_input(0, "condition"));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(1, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * other, op.strided_input(2, "other"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  if (condition->dtype() != ScalarType::kBool && condition->dtype() != ScalarType::kByte) {
    return op.program_error("condition must be bool (or uint8), got " + condition->describe());
  }
  ResultType result_type;
  result_type.add(*self);
  result_type.add(*other);
  const auto result = result_type.get();
  if (!result) {
    return op.unsupported("unsupported dtypes: self " + self->describe() + ", other " + other->describe());
  }
  ETNA_TRY(op.expect_castable(*result, *out));
  ETNA_TRY(op.expect_element_dtype(*out, "out"));
  ETNA_KERNEL_ASSIGN(Shape values_shape, op.broadcast_shapes(Shape::of(*self), "self", Shape::of(*other), "other"));
  ETNA_KERNEL_ASSIGN(Shape shape, op.broadcast_shapes(Shape::of(*condition), "condition", values_shape, "self/other"));
  ETNA_TRY(op.prepare_output(*out, shape, "out", false));
  visit_compute_type(*result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    map_elements<C, C, 3>({condition, self, other}, *out, [](C c, C a, C b) { return c != C(0) ? a : b; });
  });
  return Status::ok();
}

Status masked_fill_scalar_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * mask, op.strided_input(1, "mask"));
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(2, "value"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(op.expect_element_dtype(*out, "out"));
  ETNA_TRY(op.expect_dtype(*mask, "mask", ScalarType::kBool));
  if (!value.fits(self->dtype())) {
    return op.input_error("value " + value.describe() + " does not fit self's dtype " +
                          std::string(dtype_name(self->dtype())));
  }
  ETNA_TRY(op.expect_castable(self->dtype(), *out));
  ETNA_KERNEL_ASSIGN(Shape shape, op.broadcast_shapes(Shape::of(*self), "self", Shape::of(*mask), "mask"));
  if (shape != Shape::of(*self)) {
    return op.input_error("mask " + mask->describe() + " must broadcast to self " + self->describe());
  }
  ETNA_TRY(op.prepare_output(*out, shape, "out", false));
  visit_compute_type(self->dtype(), [&](auto tag) {
    using C = typename decltype(tag)::type;
    // The fill value is first converted to self's dtype (what PyTorch stores).
    C fill = 0;
    visit_element_dtype(self->dtype(),
                        [&](auto self_tag) { fill = convert_value<C>(value.to<typename decltype(self_tag)::type>()); });
    map_elements<C, C, 2>({self, mask}, *out, [fill](C a, C m) { return m != C(0) ? fill : a; });
  });
  return Status::ok();
}

int64_t integer_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = wrapping_mul(result, base);
    base = wrapping_mul(base, base);
    exponent >>= 1;
  }
  return result;
}

Status pow_tensor_scalar_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "exponent", false));
  const Operand& exponent = call.other;
  ETNA_TRY(op.expect_castable(call.result, *call.out));
  if (!is_floating_dtype(call.result) && exponent.scalar.to<int64_t>() < 0) {
    return op.input_error("integers to negative integer powers are not allowed (exponent " +
                          exponent.scalar.describe() + ")");
  }
  ETNA_TRY(prepare_binary_output(op, *call.self, exponent, *call.out));
  if (is_floating_dtype(call.result)) {
    visit_compute_type(call.result, [&](auto tag) {
      using C = typename decltype(tag)::type;
      apply_binary<C, C>(*call.self, exponent, *call.out, [](C a, C b) { return static_cast<C>(std::pow(a, b)); });
    });
  } else {
    apply_binary<int64_t, int64_t>(*call.self, exponent, *call.out,
                                   [](int64_t a, int64_t b) { return integer_power(a, b); });
  }
  return Status::ok();
}

// --- logical, bitwise, maximum, minimum ----------------------------------------------

enum class Logical { kAnd, kOr, kXor };

// Truth of each operand (non-zero, NaN included), written to out as 0/1 in
// whatever dtype out has.
Status logical(const OpArgs& op, Logical kind) {
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "other", true));
  ETNA_TRY(prepare_binary_output(op, *call.self, call.other, *call.out));
  visit_compute_type(call.result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    apply_binary<C, bool>(*call.self, call.other, *call.out, [kind](C a, C b) {
      const bool x = a != C(0), y = b != C(0);
      switch (kind) {
        case Logical::kAnd: return x && y;
        case Logical::kOr: return x || y;
        case Logical::kXor: break;
      }
      return x != y;
    });
  });
  return Status::ok();
}

enum class Bitwise { kAnd, kOr, kXor };

// Integer or bool operands only; computed on int64, whose low bits are those
// of any narrower integer dtype.
Status bitwise(const OpArgs& op, bool other_is_tensor, Bitwise kind) {
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "other", other_is_tensor));
  if (is_floating_dtype(call.result)) {
    return op.program_error(
        "bitwise operators need integer or bool operands, got self " + call.self->describe() +
        (call.other.tensor ? ", other " + call.other.tensor->describe() : ", other " + call.other.scalar.describe()));
  }
  ETNA_TRY(op.expect_castable(call.result, *call.out));
  ETNA_TRY(prepare_binary_output(op, *call.self, call.other, *call.out));
  apply_binary<int64_t, int64_t>(*call.self, call.other, *call.out, [kind](int64_t a, int64_t b) {
    switch (kind) {
      case Bitwise::kAnd: return a & b;
      case Bitwise::kOr: return a | b;
      case Bitwise::kXor: break;
    }
    return a ^ b;
  });
  return Status::ok();
}

Status bitwise_not_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  ETNA_TRY(op.expect_supported_dtype(*self, "self"));
  ETNA_TRY(op.expect_supported_dtype(*out, "out"));
  if (is_floating_dtype(self->dtype())) {
    return op.program_error("bitwise_not needs an integer or bool self, got " + self->describe());
  }
  ETNA_TRY(op.expect_castable(self->dtype(), *out));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*self), "out", false));
  // Bool negates logically; integers flip every bit.
  if (self->dtype() == ScalarType::kBool) {
    map_elements<int64_t, bool, 1>({self}, *out, [](int64_t x) { return x == 0; });
  } else {
    map_elements<int64_t, int64_t, 1>({self}, *out, [](int64_t x) { return ~x; });
  }
  return Status::ok();
}

// Elementwise larger (or smaller) value in the promoted dtype; NaN wins.
template <bool kMax>
Status extreme_of_two(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(BinaryCall call, read_binary_call(op, "other", true));
  ETNA_TRY(op.expect_castable(call.result, *call.out));
  ETNA_TRY(prepare_binary_output(op, *call.self, call.other, *call.out));
  visit_compute_type(call.result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    apply_binary<C, C>(*call.self, call.other, *call.out, [](C a, C b) {
      if (is_nan_value(a)) return a;
      if (is_nan_value(b)) return b;
      return (kMax ? a > b : a < b) ? a : b;
    });
  });
  return Status::ok();
}

// --- registered entry points ------------------------------------------------------

#define ETNA_ARITH_KERNEL(fn, tensor_other, kind, has_alpha) \
  Status fn(KernelArgs args) { return arithmetic(OpArgs(args), tensor_other, kind, has_alpha); }
ETNA_ARITH_KERNEL(add_out, true, Arith::kAdd, true)
ETNA_ARITH_KERNEL(add_scalar_out, false, Arith::kAdd, true)
ETNA_ARITH_KERNEL(sub_out, true, Arith::kSub, true)
ETNA_ARITH_KERNEL(sub_scalar_out, false, Arith::kSub, true)
ETNA_ARITH_KERNEL(rsub_scalar_out, false, Arith::kReverseSub, true)
ETNA_ARITH_KERNEL(mul_out, true, Arith::kMul, false)
ETNA_ARITH_KERNEL(mul_scalar_out, false, Arith::kMul, false)
#undef ETNA_ARITH_KERNEL

Status div_out(KernelArgs args) { return divide(OpArgs(args), true, false); }
Status div_scalar_out(KernelArgs args) { return divide(OpArgs(args), false, false); }
Status div_out_mode(KernelArgs args) { return divide(OpArgs(args), true, true); }
Status div_scalar_mode_out(KernelArgs args) { return divide(OpArgs(args), false, true); }
Status remainder_tensor_out(KernelArgs args) { return remainder(OpArgs(args), true); }
Status remainder_scalar_out(KernelArgs args) { return remainder(OpArgs(args), false); }

#define ETNA_COMPARE_KERNELS(name, kind)                                                      \
  Status name##_scalar_out(KernelArgs args) { return comparison(OpArgs(args), false, kind); } \
  Status name##_tensor_out(KernelArgs args) { return comparison(OpArgs(args), true, kind); }
ETNA_COMPARE_KERNELS(eq, Compare::kEq)
ETNA_COMPARE_KERNELS(ne, Compare::kNe)
ETNA_COMPARE_KERNELS(lt, Compare::kLt)
ETNA_COMPARE_KERNELS(gt, Compare::kGt)
ETNA_COMPARE_KERNELS(le, Compare::kLe)
ETNA_COMPARE_KERNELS(ge, Compare::kGe)
#undef ETNA_COMPARE_KERNELS

Status logical_and_out(KernelArgs args) { return logical(OpArgs(args), Logical::kAnd); }
Status logical_or_out(KernelArgs args) { return logical(OpArgs(args), Logical::kOr); }
Status logical_xor_out(KernelArgs args) { return logical(OpArgs(args), Logical::kXor); }

#define ETNA_BITWISE_KERNELS(name, kind)                                                            \
  Status bitwise_##name##_tensor_out(KernelArgs args) { return bitwise(OpArgs(args), true, kind); } \
  Status bitwise_##name##_scalar_out(KernelArgs args) { return bitwise(OpArgs(args), false, kind); }
ETNA_BITWISE_KERNELS(and, Bitwise::kAnd)
ETNA_BITWISE_KERNELS(or, Bitwise::kOr)
ETNA_BITWISE_KERNELS(xor, Bitwise::kXor)
#undef ETNA_BITWISE_KERNELS

}  // namespace

void register_binary_kernels(KernelRegistry& registry) {
  registry.add({"aten::add.out", 5, add_out});
  registry.add({"aten::add.Scalar_out", 5, add_scalar_out});
  registry.add({"aten::sub.out", 5, sub_out});
  registry.add({"aten::sub.Scalar_out", 5, sub_scalar_out});
  registry.add({"aten::rsub.Scalar_out", 5, rsub_scalar_out});
  registry.add({"aten::mul.out", 4, mul_out});
  registry.add({"aten::mul.Scalar_out", 4, mul_scalar_out});
  registry.add({"aten::div.out", 4, div_out});
  registry.add({"aten::div.Scalar_out", 4, div_scalar_out});
  registry.add({"aten::div.out_mode", 5, div_out_mode});
  registry.add({"aten::div.Scalar_mode_out", 5, div_scalar_mode_out});
  registry.add({"aten::remainder.Tensor_out", 4, remainder_tensor_out});
  registry.add({"aten::remainder.Scalar_out", 4, remainder_scalar_out});
  registry.add({"aten::eq.Scalar_out", 4, eq_scalar_out});
  registry.add({"aten::eq.Tensor_out", 4, eq_tensor_out});
  registry.add({"aten::ne.Scalar_out", 4, ne_scalar_out});
  registry.add({"aten::ne.Tensor_out", 4, ne_tensor_out});
  registry.add({"aten::lt.Scalar_out", 4, lt_scalar_out});
  registry.add({"aten::lt.Tensor_out", 4, lt_tensor_out});
  registry.add({"aten::gt.Scalar_out", 4, gt_scalar_out});
  registry.add({"aten::gt.Tensor_out", 4, gt_tensor_out});
  registry.add({"aten::le.Scalar_out", 4, le_scalar_out});
  registry.add({"aten::le.Tensor_out", 4, le_tensor_out});
  registry.add({"aten::ge.Scalar_out", 4, ge_scalar_out});
  registry.add({"aten::ge.Tensor_out", 4, ge_tensor_out});
  registry.add({"aten::where.self_out", 5, where_self_out});
  registry.add({"aten::masked_fill.Scalar_out", 5, masked_fill_scalar_out});
  registry.add({"aten::pow.Tensor_Scalar_out", 4, pow_tensor_scalar_out});
  registry.add({"aten::logical_and.out", 4, logical_and_out});
  registry.add({"aten::logical_or.out", 4, logical_or_out});
  registry.add({"aten::logical_xor.out", 4, logical_xor_out});
  registry.add({"aten::bitwise_and.Tensor_out", 4, bitwise_and_tensor_out});
  registry.add({"aten::bitwise_and.Scalar_out", 4, bitwise_and_scalar_out});
  registry.add({"aten::bitwise_or.Tensor_out", 4, bitwise_or_tensor_out});
  registry.add({"aten::bitwise_or.Scalar_out", 4, bitwise_or_scalar_out});
  registry.add({"aten::bitwise_xor.Tensor_out", 4, bitwise_xor_tensor_out});
  registry.add({"aten::bitwise_xor.Scalar_out", 4, bitwise_xor_scalar_out});
  registry.add({"aten::bitwise_not.out", 3, bitwise_not_out});
  registry.add({"aten::maximum.out", 4, extreme_of_two<true>});
  registry.add({"aten::minimum.out", 4, extreme_of_two<false>});
}

}  // namespace etna::kernels
