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
#include "kernels/unary_map.h"

namespace etna::kernels {
namespace {

// Arguments are [self, out, ret]; float16 and bfloat16 are not taken.
Result<UnaryOperands> read_operands(const OpArgs& op) { return read_unary(op, 1, UnaryDtypes::kSupported); }

// Integers pass through unchanged.
template <typename Fn>
Status rounding_kernel(KernelArgs args, Fn fn) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_operands(op));
  return same_dtype_unary(op, operands, [&fn](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      return fn(x);
    } else {
      return x;
    }
  });
}

Status floor_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) { return std::floor(x); });
}

Status ceil_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) { return std::ceil(x); });
}

// Halves go to the even neighbour (round(2.5) = 2), as in ONNX and PyTorch;
// what rounds to zero keeps x's sign (round(-0.3) = -0).
Status round_out(KernelArgs args) {
  return rounding_kernel(args, [](auto x) {
    using T = decltype(x);
    const T down = std::floor(x);
    const T fraction = x - down;
    T rounded = down;
    if (fraction > T(0.5) || (fraction == T(0.5) && std::fmod(down, T(2)) != 0)) rounded = down + 1;
    return std::isnan(x) || std::isinf(x) ? x : std::copysign(rounded, x);
  });
}

Status erf_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(UnaryOperands operands, read_operands(op));
  return floating_unary(op, operands, [](auto x) { return std::erf(x); });
}

}  // namespace

void register_onnx_support_kernels(KernelRegistry& registry) {
  registry.add({"aten::floor.out", 3, floor_out});
  registry.add({"aten::ceil.out", 3, ceil_out});
  registry.add({"aten::round.out", 3, round_out});
  registry.add({"aten::erf.out", 3, erf_out});
}

}  // namespace etna::kernels
