// Elementwise rounding and erf, needed by imported ONNX models (Floor, Ceil,
// Round, Erf): aten::floor.out, aten::ceil.out, aten::round.out, aten::erf.out.
// floor/ceil/round keep self's dtype (integers pass through unchanged); erf
// gives float32 for integer inputs, like the other floating functions.

#include <cfenv>
#include <cmath>

#include "kernels/dtype_promotion.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {
namespace {

// Arguments are [self, out, ret]; float16 and bfloat16 are not taken.
Result<UnaryOperands> read_operands(const OpArgs& op) { return read_unary(op, 1, UnaryDtypes::kSupported); }

template <typename Fn>
Status rounding_kernel(KernelArgs args, Fn fn) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_operands(op));
  const Tensor& self = *operands.self;
  Tensor& out = *operands.out;
  if (self.dtype() == ScalarType::kBool) return op.program_error("self must not be bool, got " + self.describe());
  ETNA_TRY(op.expect_castable(self.dtype(), out));
  ETNA_TRY(op.prepare_output(out, Shape::of(self), "out", false));
  visit_compute_type(self.dtype(), [&](auto tag) {
    using C = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<C>) {
      map_elements<C, C, 1>({&self}, out, [&fn](C x) { return static_cast<C>(fn(x)); });
    } else {
      map_elements<C, C, 1>({&self}, out, [](C x) { return x; });
    }
  });
  return Status::ok();
}

Status floor_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) { return std::floor(x); });
}

Status ceil_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) { return std::ceil(x); });
}

// Halves go to the even neighbour (round(2.5) = 2), as in ONNX and PyTorch.
Status round_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) {
    const auto down = std::floor(x);
    const auto fraction = x - down;
    if (fraction > decltype(x)(0.5)) return down + 1;
    if (fraction < decltype(x)(0.5)) return down;
    return std::fmod(down, decltype(x)(2)) == 0 ? down : down + 1;
  });
}

Status erf_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_operands(op));
  const Tensor& self = *operands.self;
  Tensor& out = *operands.out;
  const ScalarType result = is_floating_dtype(self.dtype()) ? self.dtype() : ScalarType::kFloat;
  ETNA_TRY(op.expect_castable(result, out));
  ETNA_TRY(op.prepare_output(out, Shape::of(self), "out", false));
  visit_floating_dtype(result, [&](auto tag) {
    using C = typename decltype(tag)::type;
    map_elements<C, C, 1>({&self}, out, [](C x) { return static_cast<C>(std::erf(x)); });
  });
  return Status::ok();
}

}  // namespace

void register_onnx_support_kernels(KernelRegistry& registry) {
  registry.add({"aten::floor.out", 3, floor_out});
  registry.add({"aten::ceil.out", 3, ceil_out});
  registry.add({"aten::round.out", 3, round_out});
  registry.add({"aten::erf.out", 3, erf_out});
}

}  // namespace etna::kernels
