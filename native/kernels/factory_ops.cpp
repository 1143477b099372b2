// Operators that create values from Scalars: full, zeros, ones, the *_like
// forms, scalar_tensor and arange, and the uninitialized _empty_dim_order.
// The out tensor's dtype is the result dtype; a fill value that does not fit
// it is an error.

#include <cmath>
#include <string>
#include <vector>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

Status fill_output(const OpArgs& op, Tensor& out, const Shape& shape, const Scalar& value) {
  ETNA_TRY(op.expect_element_dtype(out, "out"));
  if (!value.fits(out.dtype())) {
    return op.input_error("fill value " + value.describe() + " does not fit out dtype " +
                          std::string(dtype_name(out.dtype())));
  }
  ETNA_TRY(op.prepare_output(out, shape, "out", false));
  fill_tensor(out, value);
  return Status::ok();
}

Result<Shape> size_argument(const OpArgs& op, size_t index) {
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> sizes, op.int_list_arg(index, "size"));
  return shape_from_sizes(op, sizes, "size", std::nullopt);
}

Status full_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Shape shape, size_argument(op, 0));
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(1, "fill_value"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  return fill_output(op, *out, shape, value);
}

// zeros (kValue 0) and ones (1).
template <int64_t kValue>
Status constant_sized(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Shape shape, size_argument(op, 0));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  return fill_output(op, *out, shape, Scalar::from_int(kValue));
}

Status full_like_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.tensor(0, "self"));  // only its shape is used
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(1, "fill_value"));
  ETNA_TRY(op.check_memory_format_arg(2, "memory_format"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  return fill_output(op, *out, Shape::of(*self), value);
}

// zeros_like (kValue 0) and ones_like (1).
template <int64_t kValue>
Status constant_like(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.tensor(0, "self"));
  ETNA_TRY(op.check_memory_format_arg(1, "memory_format"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  return fill_output(op, *out, Shape::of(*self), Scalar::from_int(kValue));
}

Status scalar_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(0, "s"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  return fill_output(op, *out, Shape(), value);
}

// --- arange ------------------------------------------------------------------------

Status arange_values(const OpArgs& op, const Scalar& start, const Scalar& end, const Scalar& step, Tensor& out) {
  ETNA_TRY(op.expect_element_dtype(out, "out"));
  if (out.dtype() == ScalarType::kBool) return op.program_error("out must not be bool");
  const bool integers = !start.is_double() && !end.is_double() && !step.is_double();
  const double start_d = start.to<double>(), end_d = end.to<double>(), step_d = step.to<double>();
  if (!std::isfinite(start_d) || !std::isfinite(end_d)) return op.input_error("start and end must be finite");
  if (step_d == 0) return op.input_error("step must not be zero");
  if ((step_d > 0 && end_d < start_d) || (step_d < 0 && end_d > start_d)) {
    return op.input_error("start " + start.describe() + " and end " + end.describe() + " are inconsistent with step " +
                          step.describe());
  }
  int64_t count = 0;
  if (integers) {
    // Exact integer count: ceil((end - start) / step).
    const int64_t s = start.to<int64_t>(), e = end.to<int64_t>(), k = step.to<int64_t>();
    int64_t span = 0;
    if (__builtin_sub_overflow(e, s, &span) || span == INT64_MIN) return op.input_error("the range is too large");
    count = span / k + (span % k != 0 ? 1 : 0);
  } else {
    const double size = std::ceil((end_d - start_d) / step_d);
    if (!(size >= 0 && size < 9.0e18)) return op.input_error("the range is too large");
    count = static_cast<int64_t>(size);
  }
  Shape shape;
  shape.rank = 1;
  shape[0] = count;
  ETNA_TRY(op.prepare_output(out, shape));
  void* data = out.data();
  if (integers && !is_floating_dtype(out.dtype())) {
    const int64_t s = start.to<int64_t>(), k = step.to<int64_t>();
    const WriteFn<int64_t> write = writer_for<int64_t>(out.dtype());
    for (int64_t i = 0; i < count; ++i) write(data, i, wrapping_add(s, wrapping_mul(i, k)));
  } else {
    const WriteFn<double> write = writer_for<double>(out.dtype());
    for (int64_t i = 0; i < count; ++i) write(data, i, start_d + static_cast<double>(i) * step_d);
  }
  return Status::ok();
}

Status arange_start_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Scalar start, op.scalar_arg(0, "start"));
  ETNA_KERNEL_ASSIGN(Scalar end, op.scalar_arg(1, "end"));
  ETNA_KERNEL_ASSIGN(Scalar step, op.scalar_arg(2, "step"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  return arange_values(op, start, end, step, *out);
}

Status arange_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Scalar end, op.scalar_arg(0, "end"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  return arange_values(op, Scalar::from_int(0), end, Scalar::from_int(1), *out);
}

// An uninitialized tensor: only resizes out, whose dim order must be the
// requested one (row-major when None), as in ExecuTorch. Any dtype.
Status empty_dim_order_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Shape shape, size_argument(op, 0));
  ETNA_KERNEL_ASSIGN(OptionalIntList dim_order, op.optional_int_list_arg(1, "dim_order"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  if (dim_order.present) {
    bool matches = dim_order.items.size() == out->rank();
    for (size_t d = 0; matches && d < out->rank(); ++d) matches = dim_order.items[d] == out->dim_order()[d];
    if (!matches) return op.program_error("out " + out->describe() + " does not have the requested dim_order");
  } else if (!out->is_contiguous()) {
    return op.program_error("out " + out->describe() + " must be row-major when dim_order is None");
  }
  return op.prepare_output(*out, shape, "out", false);
}

}  // namespace

void register_factory_kernels(KernelRegistry& registry) {
  registry.add({"aten::full.out", 4, full_out});
  registry.add({"aten::zeros.out", 3, constant_sized<0>});
  registry.add({"aten::ones.out", 3, constant_sized<1>});
  registry.add({"aten::full_like.out", 5, full_like_out});
  registry.add({"aten::zeros_like.out", 4, constant_like<0>});
  registry.add({"aten::ones_like.out", 4, constant_like<1>});
  registry.add({"aten::scalar_tensor.out", 3, scalar_tensor_out});
  registry.add({"aten::arange.start_out", 5, arange_start_out});
  registry.add({"aten::arange.out", 3, arange_out});
  registry.add({"dim_order_ops::_empty_dim_order.out", 4, empty_dim_order_out});
}

}  // namespace etna::kernels
