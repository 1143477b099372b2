// The two result rules of elementwise operators with one tensor operand
// (unary_ops.cpp, onnx_support_ops.cpp): fn maps each element of self into out.
#pragma once

#include "kernels/dtype_promotion.h"
#include "kernels/iteration.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {

// Computes fn in the type of dtype `result`, which out must be castable from.
template <typename Fn>
Status map_unary(const OpArgs& op, const UnaryOperands& operands, ScalarType result, Fn fn) {
  const Tensor& self = *operands.self;
  Tensor& out = *operands.out;
  ETNA_TRY(op.expect_castable(result, out));
  ETNA_TRY(op.prepare_output(out, Shape::of(self), "out", false));
  visit_compute_type(result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    map_elements<C, C, 1>({&self}, out, [&fn](C x) { return static_cast<C>(fn(x)); });
  });
  return Status::ok();
}

// Operators whose result is floating: integer and bool inputs produce float32.
template <typename Fn>
Status floating_unary(const OpArgs& op, const UnaryOperands& operands, Fn fn) {
  const ScalarType self = operands.self->dtype();
  return map_unary(op, operands, is_floating_dtype(self) ? self : ScalarType::kFloat, fn);
}

// Operators whose result keeps self's dtype (bool is rejected).
template <typename Fn>
Status same_dtype_unary(const OpArgs& op, const UnaryOperands& operands, Fn fn) {
  const Tensor& self = *operands.self;
  if (self.dtype() == ScalarType::kBool) return op.program_error("self must not be bool, got " + self.describe());
  return map_unary(op, operands, self.dtype(), fn);
}

}  // namespace etna::kernels
