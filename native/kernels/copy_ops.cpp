// Copies between tensors: clone/alias, dtype conversion, dim-order
// conversion and the in-place copy_ used for state write-back. Both sides are
// accessed through their strides, so any dim order works.

#include <string>
#include <vector>

#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {
namespace {

// Copies self into out (resized to self's shape), converting the dtype.
Status convert_into(const OpArgs& op, const Tensor& self, Tensor& out) {
  ETNA_TRY(op.expect_convertible(self, "self", out, "out"));
  ETNA_TRY(op.prepare_output(out, Shape::of(self), "out", /*row_major=*/false));
  copy_broadcast(self, out);
  return Status::ok();
}

Status alias_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  return convert_into(op, *self, *out);
}

Status clone_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_TRY(op.check_memory_format_arg(1, "memory_format"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  return convert_into(op, *self, *out);
}

Status to_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(bool non_blocking, op.bool_arg(1, "non_blocking"));
  (void)non_blocking;  // copies are synchronous on the CPU
  ETNA_TRY(op.check_memory_format_arg(2, "memory_format"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  return convert_into(op, *self, *out);
}

// Checks that out is laid out in the requested dim order: its strides must
// be those the order gives (dims of size 1 may differ).
Status check_dim_order(const OpArgs& op, const OptionalIntList& dim_order, const Tensor& self, const Tensor& out) {
  if (!dim_order.present) return Status::ok();
  const std::vector<int64_t>& order = dim_order.items;
  const size_t rank = self.rank();
  if (order.size() != rank) {
    return op.input_error("dim_order has " + std::to_string(order.size()) + " entries but self " + self.describe() +
                          " has rank " + std::to_string(rank));
  }
  std::array<bool, kMaxTensorRank> seen{};
  for (int64_t d : order) {
    if (d < 0 || static_cast<size_t>(d) >= rank || seen[static_cast<size_t>(d)]) {
      return op.input_error("dim_order is not a permutation of 0.." + std::to_string(rank == 0 ? 0 : rank - 1));
    }
    seen[static_cast<size_t>(d)] = true;
  }
  Strides expected{};
  int64_t stride = 1;
  for (size_t k = rank; k-- > 0;) {
    const auto d = static_cast<size_t>(order[k]);
    expected[d] = stride;
    stride *= self.size(d) == 0 ? 1 : self.size(d);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (self.size(d) != 1 && out.stride(d) != expected[d]) {
      return op.program_error("out " + out.describe() + " is not laid out in the requested dim_order");
    }
  }
  return Status::ok();
}

// _clone_dim_order keeps the dtype; _to_dim_order_copy may convert it.
template <bool kSameDtype>
Status dim_order_copy(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(bool non_blocking, op.bool_arg(1, "non_blocking"));
  (void)non_blocking;  // copies are synchronous on the CPU
  ETNA_KERNEL_ASSIGN(OptionalIntList dim_order, op.optional_int_list_arg(2, "dim_order"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  if (kSameDtype) ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_TRY(op.expect_convertible(*self, "self", *out, "out"));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*self), "out", /*row_major=*/false));
  ETNA_TRY(check_dim_order(op, dim_order, *self, *out));
  copy_broadcast(*self, *out);
  return Status::ok();
}

// src must broadcast to dst's shape.
Status check_broadcasts_to(const OpArgs& op, const Tensor& src, const Tensor& dst, std::string_view dst_name) {
  ETNA_KERNEL_ASSIGN(Shape shape, op.broadcast_shapes(Shape::of(src), "src", Shape::of(dst), dst_name));
  if (shape != Shape::of(dst)) {
    return op.input_error("src " + src.describe() + " does not broadcast to " + std::string(dst_name) + " " +
                          dst.describe());
  }
  return Status::ok();
}

Status copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.tensor(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * src, op.strided_input(1, "src"));
  ETNA_KERNEL_ASSIGN(bool non_blocking, op.bool_arg(2, "non_blocking"));
  (void)non_blocking;
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  // The result has self's shape and src's values; self's data is not read.
  ETNA_TRY(check_broadcasts_to(op, *src, *self, "self"));
  ETNA_TRY(op.expect_convertible(*src, "src", *out, "out"));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*self), "out", false));
  copy_broadcast(*src, *out);
  return Status::ok();
}

Status copy_in_place(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * src, op.strided_input(1, "src"));
  ETNA_KERNEL_ASSIGN(bool non_blocking, op.bool_arg(2, "non_blocking"));
  (void)non_blocking;
  ETNA_TRY(check_broadcasts_to(op, *src, *self, "self"));
  ETNA_TRY(op.expect_convertible(*src, "src", *self, "self"));
  copy_broadcast(*src, *self);
  return op.return_self(3);
}

}  // namespace

void register_copy_kernels(KernelRegistry& registry) {
  registry.add({"aten::alias_copy.out", 3, alias_copy_out});
  registry.add({"aten::clone.out", 4, clone_out});
  registry.add({"aten::_to_copy.out", 5, to_copy_out});
  registry.add({"dim_order_ops::_to_dim_order_copy.out", 5, dim_order_copy<false>});
  registry.add({"dim_order_ops::_clone_dim_order.out", 5, dim_order_copy<true>});
  registry.add({"aten::copy.out", 5, copy_out});
  registry.add({"aten::copy_", 4, copy_in_place});
}

}  // namespace etna::kernels
