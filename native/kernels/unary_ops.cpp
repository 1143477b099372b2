// Elementwise operators with one tensor operand: math functions,
// activations, clamps and logical_not.

#include <algorithm>
#include <cmath>

#include "kernels/dtype_promotion.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"
#include "kernels/unary_map.h"

namespace etna::kernels {
namespace {

template <typename Fn>
Status floating_unary_kernel(KernelArgs args, Fn fn) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 1));
  return floating_unary(op, operands, fn);
}

template <typename Fn>
Status same_dtype_unary_kernel(KernelArgs args, Fn fn) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 1));
  return same_dtype_unary(op, operands, fn);
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

Status exp_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::exp(x); });
}
Status log_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::log(x); });
}
Status sqrt_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::sqrt(x); });
}
Status rsqrt_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}
Status sin_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::sin(x); });
}
Status cos_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::cos(x); });
}
Status tanh_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return std::tanh(x); });
}
Status sigmoid_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return sigmoid(x); });
}
Status silu_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) { return x * sigmoid(x); });
}
// PyTorch's hardswish: x * clamp(x + 3, 0, 6) / 6.
Status hardswish_out(KernelArgs args) {
  return floating_unary_kernel(args, [](auto x) {
    using T = decltype(x);
    return x * std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
  });
}

Status gelu_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 2));
  ETNA_KERNEL_ASSIGN(std::optional<std::string_view> approximate, op.optional_string_arg(1, "approximate"));
  if (!approximate || *approximate == "none") {
    return floating_unary(op, operands, [](auto x) {
      using T = decltype(x);
      return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    });
  }
  if (*approximate == "tanh") {
    return floating_unary(op, operands, [](auto x) {
      using T = decltype(x);
      const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);  // sqrt(2/pi)
      return T(0.5) * x * (T(1) + std::tanh(inner));
    });
  }
  return op.program_error("approximate must be 'none' or 'tanh', got '" + std::string(*approximate) + "'");
}

Status neg_out(KernelArgs args) {
  return same_dtype_unary_kernel(args, [](auto x) { return wrapping_neg(x); });
}
Status relu_out(KernelArgs args) {
  // NaN compares false, so it passes through unchanged as in PyTorch.
  return same_dtype_unary_kernel(args, [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
}
Status abs_out(KernelArgs args) {
  return same_dtype_unary_kernel(args, [](auto x) {
    // fabs clears the sign of -0 too, as PyTorch's abs does.
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      return std::fabs(x);
    } else {
      return x < decltype(x)(0) ? wrapping_neg(x) : x;
    }
  });
}

Status logical_not_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 1));
  ETNA_TRY(op.prepare_output(*operands.out, Shape::of(*operands.self), "out", false));
  visit_compute_type(operands.self->dtype(), [&](auto tag) {
    using C = typename decltype(tag)::type;
    map_elements<C, bool, 1>({operands.self}, *operands.out, [](C x) { return x == C(0); });
  });
  return Status::ok();
}

Status leaky_relu_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 2));
  ETNA_KERNEL_ASSIGN(Scalar slope, op.scalar_arg(1, "negative_slope"));
  ETNA_TRY(op.expect_any_floating(*operands.self, "self"));
  const double slope_value = slope.to<double>();
  return floating_unary(op, operands, [slope_value](auto x) {
    using T = decltype(x);
    return x > T(0) ? x : x * static_cast<T>(slope_value);
  });
}

// Clamps to [low, high] in compute type C; a NaN bound or input gives NaN.
template <typename C>
C clamp_value(C x, bool has_low, C low, bool has_high, C high) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(x)) return x;
    if (has_low && std::isnan(low)) return low;
    if (has_high && std::isnan(high)) return high;
  }
  if (has_low && x < low) x = low;
  if (has_high && x > high) x = high;
  return x;
}

Status clamp_to_range(const OpArgs& op, const UnaryOperands& operands, ScalarType result,
                      const std::optional<Scalar>& low, const std::optional<Scalar>& high) {
  ETNA_TRY(op.expect_castable(result, *operands.out));
  ETNA_TRY(op.prepare_output(*operands.out, Shape::of(*operands.self), "out", false));
  visit_compute_type(result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    const C low_value = low ? low->to<C>() : C(0);
    const C high_value = high ? high->to<C>() : C(0);
    const bool has_low = low.has_value();
    const bool has_high = high.has_value();
    map_elements<C, C, 1>({operands.self}, *operands.out,
                          [=](C x) { return clamp_value(x, has_low, low_value, has_high, high_value); });
  });
  return Status::ok();
}

Status clamp_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 3));
  ETNA_KERNEL_ASSIGN(std::optional<Scalar> low, op.optional_scalar_arg(1, "min"));
  ETNA_KERNEL_ASSIGN(std::optional<Scalar> high, op.optional_scalar_arg(2, "max"));
  if (!low && !high) return op.program_error("at least one of min and max must not be None");
  ResultType result_type;
  result_type.add(*operands.self);
  if (low) result_type.add(*low);
  if (high) result_type.add(*high);
  const auto result = result_type.get();
  if (!result) return op.unsupported("unsupported dtype " + operands.self->describe());
  return clamp_to_range(op, operands, *result, low, high);
}

Status hardtanh_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_unary(op, 3));
  ETNA_KERNEL_ASSIGN(Scalar low, op.scalar_arg(1, "min_val"));
  ETNA_KERNEL_ASSIGN(Scalar high, op.scalar_arg(2, "max_val"));
  if (operands.self->dtype() == ScalarType::kBool) {
    return op.program_error("self must not be bool, got " + operands.self->describe());
  }
  // hardtanh keeps self's dtype; the bounds are converted to it.
  return clamp_to_range(op, operands, operands.self->dtype(), low, high);
}

}  // namespace

void register_unary_kernels(KernelRegistry& registry) {
  registry.add({"aten::exp.out", 3, exp_out});
  registry.add({"aten::log.out", 3, log_out});
  registry.add({"aten::sqrt.out", 3, sqrt_out});
  registry.add({"aten::rsqrt.out", 3, rsqrt_out});
  registry.add({"aten::sin.out", 3, sin_out});
  registry.add({"aten::cos.out", 3, cos_out});
  registry.add({"aten::tanh.out", 3, tanh_out});
  registry.add({"aten::sigmoid.out", 3, sigmoid_out});
  registry.add({"aten::silu.out", 3, silu_out});
  registry.add({"aten::hardswish.out", 3, hardswish_out});
  registry.add({"aten::gelu.out", 4, gelu_out});
  registry.add({"aten::neg.out", 3, neg_out});
  registry.add({"aten::relu.out", 3, relu_out});
  registry.add({"aten::abs.out", 3, abs_out});
  registry.add({"aten::logical_not.out", 3, logical_not_out});
  registry.add({"aten::leaky_relu.out", 4, leaky_relu_out});
  registry.add({"aten::clamp.out", 5, clamp_out});
  registry.add({"aten::hardtanh.out", 5, hardtanh_out});
}

}  // namespace etna::kernels
