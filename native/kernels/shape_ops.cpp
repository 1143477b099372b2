// Operators that rearrange elements without computing on them: reshapes,
// permutations, expansion, selection and slicing, concatenation, stacking,
// splitting, unbinding, repeating, triangular masks and constant padding. self is read through its strides (any dim
// order); results are written row-major. Differing self/out dtypes convert.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dtype_promotion.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

Shape drop_dim(const Shape& shape, size_t dim) {
  Shape result;
  for (size_t d = 0; d < shape.rank; ++d) {
    if (d != dim) result[result.rank++] = shape[d];
  }
  return result;
}

Strides drop_stride(const Strides& strides, size_t rank, size_t dim) {
  Strides result{};
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (d != dim) result[next++] = strides[d];
  }
  return result;
}

// Writes self's elements, in row-major order, into out reshaped to `shape`.
Status reshape_into(const OpArgs& op, const Tensor& self, Tensor& out, const Shape& shape) {
  ETNA_TRY(op.expect_convertible(self, "self", out, "out"));
  if (shape.numel() != static_cast<int64_t>(self.numel())) {
    return op.input_error("shape " + shape.to_string() + " has " + std::to_string(shape.numel()) +
                          " elements but self " + self.describe() + " has " + std::to_string(self.numel()));
  }
  ETNA_TRY(op.prepare_output(out, shape));
  const Shape self_shape = Shape::of(self);
  const Strides src = strides_of(self);
  const Strides dst = row_major_strides(self_shape);
  copy_strided(self_shape, self.dtype(), self.data(), src.data(), 0, out.dtype(), out.data(), dst.data(), 0);
  return Status::ok();
}

// Writes the elements of `shape` read from self at `src_strides` from
// `src_base` into out (row-major, resized to `shape`).
Status gather_view_into(const OpArgs& op, const Tensor& self, const Shape& shape, const Strides& src_strides,
                        int64_t src_base, Tensor& out) {
  ETNA_TRY(op.expect_convertible(self, "self", out, "out"));
  ETNA_TRY(op.prepare_output(out, shape));
  const Strides dst = row_major_strides(shape);
  copy_strided(shape, self.dtype(), self.data(), src_strides.data(), src_base, out.dtype(), out.data(), dst.data(), 0);
  return Status::ok();
}

Status view_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> sizes, op.int_list_arg(1, "size"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_KERNEL_ASSIGN(Shape shape, shape_from_sizes(op, sizes, "size", static_cast<int64_t>(self->numel())));
  return reshape_into(op, *self, *out, shape);
}

Status unsqueeze_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  const size_t rank = self->rank();
  if (rank + 1 > kMaxTensorRank) return op.input_error("self " + self->describe() + " already has the maximum rank");
  // The new dim may go anywhere in 0..rank, so it wraps against rank + 1.
  ETNA_KERNEL_ASSIGN(size_t position, op.wrap_dim(dim, rank + 1, "dim"));
  Shape shape;
  shape.rank = rank + 1;
  for (size_t d = 0, source = 0; d < shape.rank; ++d) shape[d] = d == position ? 1 : self->size(source++);
  return reshape_into(op, *self, *out, shape);
}

// Removes the dims marked in `mask` whose size is 1.
Shape squeeze_shape(const Shape& shape, const std::array<bool, kMaxTensorRank>& mask) {
  Shape result;
  for (size_t d = 0; d < shape.rank; ++d) {
    if (!(mask[d] && shape[d] == 1)) result[result.rank++] = shape[d];
  }
  return result;
}

// Squeezes the listed dims, or every dim when `dims` is absent.
Status squeeze_kernel(const OpArgs& op, size_t out_index, const OptionalIntList& dims) {
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(out_index, "out"));
  std::array<bool, kMaxTensorRank> mask{};
  if (dims.present) {
    for (int64_t dim : dims.items) {
      ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
      if (self->rank() > 0) mask[d] = true;
    }
  } else {
    mask.fill(true);
  }
  return reshape_into(op, *self, *out, squeeze_shape(Shape::of(*self), mask));
}

Status squeeze_copy_dims_out(KernelArgs args) {
  OpArgs op(args);
  OptionalIntList dims;
  dims.present = true;
  ETNA_KERNEL_ASSIGN(dims.items, op.int_list_arg(1, "dim"));
  return squeeze_kernel(op, 2, dims);
}

Status squeeze_copy_dim_out(KernelArgs args) {
  OpArgs op(args);
  OptionalIntList dims;
  dims.present = true;
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  dims.items.push_back(dim);
  return squeeze_kernel(op, 2, dims);
}

Status squeeze_copy_out(KernelArgs args) { return squeeze_kernel(OpArgs(args), 1, OptionalIntList{}); }

// out[i...] = self[permuted index]: the dims of out are self's dims in `order`.
Status permute_into(const OpArgs& op, const Tensor& self, const std::vector<size_t>& order, Tensor& out) {
  Shape shape;
  shape.rank = order.size();
  Strides src{};
  for (size_t d = 0; d < order.size(); ++d) {
    shape[d] = self.size(order[d]);
    src[d] = self.stride(order[d]);
  }
  return gather_view_into(op, self, shape, src, 0, out);
}

Status permute_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> dims, op.int_list_arg(1, "dims"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  if (dims.size() != self->rank()) {
    return op.input_error("dims has " + std::to_string(dims.size()) + " entries but self " + self->describe() +
                          " has rank " + std::to_string(self->rank()));
  }
  std::vector<size_t> order(dims.size());
  std::array<bool, kMaxTensorRank> seen{};
  for (size_t i = 0; i < dims.size(); ++i) {
    ETNA_KERNEL_ASSIGN(order[i], op.wrap_dim(dims[i], self->rank(), "dims"));
    if (seen[order[i]]) return op.input_error("dims lists dim " + std::to_string(order[i]) + " more than once");
    seen[order[i]] = true;
  }
  return permute_into(op, *self, order, *out);
}

Status transpose_copy_int_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim0, op.int_arg(1, "dim0"));
  ETNA_KERNEL_ASSIGN(int64_t dim1, op.int_arg(2, "dim1"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_KERNEL_ASSIGN(size_t a, op.wrap_dim(dim0, self->rank(), "dim0"));
  ETNA_KERNEL_ASSIGN(size_t b, op.wrap_dim(dim1, self->rank(), "dim1"));
  std::vector<size_t> order(self->rank());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  if (!order.empty()) std::swap(order[a], order[b]);
  return permute_into(op, *self, order, *out);
}

Status expand_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> sizes, op.int_list_arg(1, "size"));
  ETNA_KERNEL_ASSIGN(bool implicit, op.bool_arg(2, "implicit"));
  (void)implicit;  // only affects autograd
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  const size_t rank = self->rank();
  if (sizes.size() < rank || sizes.size() > kMaxTensorRank) {
    return op.input_error("size has " + std::to_string(sizes.size()) + " entries; expected " + std::to_string(rank) +
                          ".." + std::to_string(kMaxTensorRank) + " for self " + self->describe());
  }
  Shape shape;
  shape.rank = sizes.size();
  Strides src{};
  const size_t leading = sizes.size() - rank;
  for (size_t d = 0; d < shape.rank; ++d) {
    const int64_t wanted = sizes[d];
    if (d < leading) {
      if (wanted < 0)
        return op.input_error("size " + std::to_string(wanted) + " is not allowed for new dim " + std::to_string(d));
      shape[d] = wanted;
      continue;
    }
    const size_t source = d - leading;
    const int64_t have = self->size(source);
    if (wanted == -1 || wanted == have) {
      shape[d] = have;
      src[d] = self->stride(source);
    } else if (have == 1 && wanted >= 0) {
      shape[d] = wanted;
    } else {
      return op.input_error("cannot expand dim " + std::to_string(source) + " of self " + self->describe() +
                            " to size " + std::to_string(wanted));
    }
  }
  return gather_view_into(op, *self, shape, src, 0, *out);
}

Status select_copy_int_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(int64_t index, op.int_arg(2, "index"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  if (self->rank() == 0) return op.input_error("cannot select from a rank-0 tensor");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const int64_t size = self->size(d);
  if (index < -size || index >= size) {
    return op.input_error("index " + std::to_string(index) + " is out of range for dim " + std::to_string(d) +
                          " of size " + std::to_string(size));
  }
  if (index < 0) index += size;
  const Shape self_shape = Shape::of(*self);
  return gather_view_into(op, *self, drop_dim(self_shape, d), drop_stride(strides_of(*self), self->rank(), d),
                          index * self->stride(d), *out);
}

Status slice_copy_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> start_arg, op.optional_int_arg(2, "start"));
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> end_arg, op.optional_int_arg(3, "end"));
  ETNA_KERNEL_ASSIGN(int64_t step, op.int_arg(4, "step"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(5, "out"));
  if (self->rank() == 0) return op.input_error("cannot slice a rank-0 tensor");
  if (step <= 0) return op.input_error("step must be positive, got " + std::to_string(step));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const int64_t size = self->size(d);
  // Python slice rules: negative bounds count from the end, then clamp.
  auto clamp_bound = [size](int64_t bound) {
    if (bound < 0) bound = bound < -size ? 0 : bound + size;
    return bound > size ? size : bound;
  };
  const int64_t start = clamp_bound(start_arg.value_or(0));
  int64_t end = clamp_bound(end_arg.value_or(size));
  if (end < start) end = start;
  Shape shape = Shape::of(*self);
  shape[d] = (end - start + step - 1) / step;
  Strides src = strides_of(*self);
  src[d] = self->stride(d) * step;
  return gather_view_into(op, *self, shape, src, start * self->stride(d), *out);
}

// --- cat, stack, split ---------------------------------------------------------------

Result<ScalarType> list_result_type(const OpArgs& op, const std::vector<Tensor*>& tensors, const Tensor& out) {
  ResultType result_type;
  for (const Tensor* t : tensors) result_type.add(*t);
  bool all_same = true;
  for (const Tensor* t : tensors) all_same = all_same && t->dtype() == out.dtype();
  if (all_same) return out.dtype();  // any dtype, copied bytewise
  const auto result = result_type.get();
  if (!result || !is_element_dtype(out.dtype())) {
    return op.unsupported("cannot combine the dtypes of tensors into out " + out.describe());
  }
  ETNA_TRY(op.expect_castable(*result, out));
  return *result;
}

// cat's and stack's arguments: tensors (not empty, each readable, their
// dtypes combining into out's), dim and out.
struct JoinArgs {
  std::vector<Tensor*> tensors;
  int64_t dim = 0;
  Tensor* out = nullptr;
};

Result<JoinArgs> read_join_args(const OpArgs& op) {
  JoinArgs join;
  ETNA_KERNEL_ASSIGN(join.tensors, op.tensor_list_arg(0, "tensors"));
  ETNA_KERNEL_ASSIGN(join.dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(join.out, op.output(2, "out"));
  if (join.tensors.empty()) return op.input_error("tensors must not be empty");
  for (size_t i = 0; i < join.tensors.size(); ++i) {
    ETNA_TRY(op.check_readable(*join.tensors[i], "tensors[" + std::to_string(i) + "]"));
  }
  ETNA_TRY(list_result_type(op, join.tensors, *join.out).status());
  return join;
}

Status cat_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(JoinArgs join, read_join_args(op));
  const auto& [tensors, dim, out] = join;
  // 1-D empty tensors are skipped (PyTorch's legacy rule).
  std::vector<const Tensor*> parts;
  for (const Tensor* t : tensors) {
    if (!(t->rank() == 1 && t->size(0) == 0)) parts.push_back(t);
  }
  if (parts.empty()) {
    Shape empty;
    empty.rank = 1;
    return op.prepare_output(*out, empty);
  }
  const Tensor& first = *parts[0];
  if (first.rank() == 0) return op.input_error("rank-0 tensors cannot be concatenated");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, first.rank(), "dim"));
  Shape shape = Shape::of(first);
  shape[d] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    bool matches = t.rank() == first.rank();
    for (size_t k = 0; matches && k < t.rank(); ++k) matches = k == d || t.size(k) == first.size(k);
    if (!matches) {
      return op.input_error("tensor " + t.describe() + " does not match " + first.describe() + " outside dim " +
                            std::to_string(d));
    }
    shape[d] += t.size(d);
  }
  ETNA_TRY(op.prepare_output(*out, shape));
  const Strides dst = strides_of(*out);
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    const Strides src = strides_of(*t);
    copy_strided(Shape::of(*t), t->dtype(), t->data(), src.data(), 0, out->dtype(), out->data(), dst.data(),
                 offset * out->stride(d));
    offset += t->size(d);
  }
  return Status::ok();
}

Status stack_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(JoinArgs join, read_join_args(op));
  const auto& [tensors, dim, out] = join;
  const Shape item_shape = Shape::of(*tensors[0]);
  for (const Tensor* t : tensors) {
    if (Shape::of(*t) != item_shape) {
      return op.input_error("all tensors must have the same shape; got " + tensors[0]->describe() + " and " +
                            t->describe());
    }
  }
  if (item_shape.rank + 1 > kMaxTensorRank) return op.input_error("the result would exceed the maximum rank");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, item_shape.rank + 1, "dim"));
  Shape shape;
  shape.rank = item_shape.rank + 1;
  for (size_t k = 0, source = 0; k < shape.rank; ++k) {
    shape[k] = k == d ? static_cast<int64_t>(tensors.size()) : item_shape[source++];
  }
  ETNA_TRY(op.prepare_output(*out, shape));
  const Strides dst = drop_stride(strides_of(*out), shape.rank, d);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    const Strides src = strides_of(t);
    copy_strided(item_shape, t.dtype(), t.data(), src.data(), 0, out->dtype(), out->data(), dst.data(),
                 static_cast<int64_t>(i) * out->stride(d));
  }
  return Status::ok();
}

// Copies consecutive pieces of `sizes` along dim d of self into `outs`.
Status split_into(const OpArgs& op, const Tensor& self, size_t d, const std::vector<int64_t>& sizes,
                  const std::vector<Tensor*>& outs) {
  if (outs.size() != sizes.size()) {
    return op.input_error("out has " + std::to_string(outs.size()) + " tensors but the split makes " +
                          std::to_string(sizes.size()));
  }
  const Strides src = strides_of(self);
  int64_t offset = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    Shape shape = Shape::of(self);
    shape[d] = sizes[i];
    const std::string name = "out[" + std::to_string(i) + "]";
    ETNA_TRY(op.expect_convertible(self, "self", *outs[i], name));
    ETNA_TRY(op.prepare_output(*outs[i], shape, name));
    const Strides dst = strides_of(*outs[i]);
    copy_strided(shape, self.dtype(), self.data(), src.data(), offset * self.stride(d), outs[i]->dtype(),
                 outs[i]->data(), dst.data(), 0);
    offset += sizes[i];
  }
  return Status::ok();
}

Status split_with_sizes_copy_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> sizes, op.int_list_arg(1, "split_sizes"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(2, "dim"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> outs, op.tensor_list_arg(3, "out"));
  if (self->rank() == 0) return op.input_error("cannot split a rank-0 tensor");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0) return op.input_error("split_sizes has negative size " + std::to_string(size));
    if (__builtin_add_overflow(total, size, &total)) return op.input_error("split_sizes overflow");
  }
  if (total != self->size(d)) {
    return op.input_error("split_sizes add up to " + std::to_string(total) + " but dim " + std::to_string(d) +
                          " of self " + self->describe() + " has size " + std::to_string(self->size(d)));
  }
  return split_into(op, *self, d, sizes, outs);
}

Status split_copy_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t split_size, op.int_arg(1, "split_size"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(2, "dim"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> outs, op.tensor_list_arg(3, "out"));
  if (self->rank() == 0) return op.input_error("cannot split a rank-0 tensor");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const int64_t size = self->size(d);
  if (split_size < 0 || (split_size == 0 && size != 0)) {
    return op.input_error("split_size " + std::to_string(split_size) + " cannot split a dim of size " +
                          std::to_string(size));
  }
  std::vector<int64_t> sizes;
  if (size == 0) sizes.push_back(0);
  for (int64_t offset = 0; offset < size; offset += split_size) {
    sizes.push_back(size - offset < split_size ? size - offset : split_size);
  }
  return split_into(op, *self, d, sizes, outs);
}

// --- unbind, repeat, tril/triu -----------------------------------------------------------

Status unbind_copy_int_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> outs, op.tensor_list_arg(2, "out"));
  if (self->rank() == 0) return op.input_error("cannot unbind a rank-0 tensor");
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  if (static_cast<int64_t>(outs.size()) != self->size(d)) {
    return op.input_error("out has " + std::to_string(outs.size()) + " tensors but dim " + std::to_string(d) +
                          " of self " + self->describe() + " has size " + std::to_string(self->size(d)));
  }
  const Shape shape = drop_dim(Shape::of(*self), d);
  const Strides src = drop_stride(strides_of(*self), self->rank(), d);
  for (size_t i = 0; i < outs.size(); ++i) {
    ETNA_TRY(gather_view_into(op, *self, shape, src, static_cast<int64_t>(i) * self->stride(d), *outs[i]));
  }
  return Status::ok();
}

// out tiles self prod(repeats) times; repeats may have more entries than
// self has dims (self gains leading dims of size 1).
Status repeat_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> repeats, op.int_list_arg(1, "repeats"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  const size_t rank = repeats.size();
  if (rank < self->rank() || rank > kMaxTensorRank) {
    return op.input_error("repeats has " + std::to_string(rank) + " entries; expected " + std::to_string(self->rank()) +
                          ".." + std::to_string(kMaxTensorRank) + " for self " + self->describe());
  }
  Shape tile;  // self with leading 1s
  Strides tile_strides{};
  tile.rank = rank;
  const size_t leading = rank - self->rank();
  std::vector<int64_t> out_sizes(rank);
  for (size_t d = 0; d < rank; ++d) {
    tile[d] = d < leading ? 1 : self->size(d - leading);
    tile_strides[d] = d < leading ? 0 : self->stride(d - leading);
    if (repeats[d] < 0) return op.input_error("repeats has negative entry " + std::to_string(repeats[d]));
    if (__builtin_mul_overflow(tile[d], repeats[d], &out_sizes[d])) return op.input_error("repeats overflow");
  }
  ETNA_KERNEL_ASSIGN(Shape shape, shape_from_sizes(op, out_sizes, "repeats", std::nullopt));
  ETNA_TRY(op.expect_convertible(*self, "self", *out, "out"));
  ETNA_TRY(op.prepare_output(*out, shape));
  if (shape.numel() == 0) return Status::ok();
  const Strides dst = row_major_strides(shape);
  // Walk the tiles like an odometer; tile t starts at sum t[d] * tile[d] * dst[d].
  std::vector<int64_t> at(rank, 0);
  for (;;) {
    int64_t base = 0;
    for (size_t d = 0; d < rank; ++d) base += at[d] * tile[d] * dst[d];
    copy_strided(tile, self->dtype(), self->data(), tile_strides.data(), 0, out->dtype(), out->data(), dst.data(),
                 base);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++at[d] < repeats[d]) break;
      at[d] = 0;
      if (d == 0) return Status::ok();
    }
    if (rank == 0) return Status::ok();
  }
}

// Keeps the elements on and below (tril) or on and above (triu) the given
// diagonal of the last two dims and zeroes the rest.
template <bool kLower>
Status triangle(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t diagonal, op.int_arg(1, "diagonal"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  if (self->rank() < 2) return op.input_error("self " + self->describe() + " must have at least 2 dims");
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  const Shape shape = Shape::of(*self);
  ETNA_TRY(gather_view_into(op, *self, shape, strides_of(*self), 0, *out));
  const int64_t rows = shape[shape.rank - 2];
  const int64_t cols = shape[shape.rank - 1];
  // Beyond these bounds every diagonal masks the same way; clamping keeps
  // i + diagonal from overflowing.
  diagonal = std::min(std::max(diagonal, -rows - 1), cols + 1);
  const int64_t matrices = rows * cols == 0 ? 0 : shape.numel() / (rows * cols);
  const size_t element = out->element_size();
  auto* bytes = static_cast<uint8_t*>(out->data());
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      // Row i keeps columns j with j - i <= diagonal (tril) or >= diagonal (triu).
      const int64_t edge = i + diagonal;
      const int64_t zero_from = kLower ? std::max<int64_t>(0, std::min(cols, edge + 1)) : 0;
      const int64_t zero_to = kLower ? cols : std::max<int64_t>(0, std::min(cols, edge));
      if (zero_to <= zero_from) continue;
      uint8_t* row = bytes + static_cast<size_t>((m * rows + i) * cols) * element;
      std::memset(row + static_cast<size_t>(zero_from) * element, 0,
                  static_cast<size_t>(zero_to - zero_from) * element);
    }
  }
  return Status::ok();
}

// --- constant_pad_nd -------------------------------------------------------------------

Status constant_pad_nd_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> pad, op.int_list_arg(1, "pad"));
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(2, "value"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  const size_t rank = self->rank();
  if (pad.size() % 2 != 0 || pad.size() > 2 * rank) {
    return op.input_error("pad must have an even length of at most " + std::to_string(2 * rank) + ", got " +
                          std::to_string(pad.size()));
  }
  if (!value.fits(self->dtype())) {
    return op.input_error("value " + value.describe() + " does not fit dtype " +
                          std::string(dtype_name(self->dtype())));
  }
  // Pairs (before, after) apply to the last dim first.
  Shape shape = Shape::of(*self);
  std::array<int64_t, kMaxTensorRank> before{};
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = rank - 1 - i;
    before[d] = pad[2 * i];
    int64_t size = 0;
    if (__builtin_add_overflow(shape[d], pad[2 * i], &size) || __builtin_add_overflow(size, pad[2 * i + 1], &size) ||
        size < 0) {
      return op.input_error("padding dim " + std::to_string(d) + " of self " + self->describe() + " by (" +
                            std::to_string(pad[2 * i]) + ", " + std::to_string(pad[2 * i + 1]) +
                            ") gives an invalid size");
    }
    shape[d] = size;
  }
  ETNA_TRY(op.prepare_output(*out, shape));
  fill_tensor(*out, value);
  // Copy the part of self that survives (negative pads crop).
  Shape region;
  region.rank = rank;
  int64_t src_base = 0;
  int64_t dst_base = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t src_begin = before[d] < 0 ? -before[d] : 0;
    const int64_t dst_begin = before[d] > 0 ? before[d] : 0;
    int64_t length = self->size(d) - src_begin;
    if (shape[d] - dst_begin < length) length = shape[d] - dst_begin;
    region[d] = length > 0 ? length : 0;
    src_base += src_begin * self->stride(d);
    dst_base += dst_begin * out->stride(d);
  }
  if (region.numel() == 0) return Status::ok();
  const Strides src = strides_of(*self);
  const Strides dst = strides_of(*out);
  copy_strided(region, self->dtype(), self->data(), src.data(), src_base, out->dtype(), out->data(), dst.data(),
               dst_base);
  return Status::ok();
}

}  // namespace

void register_shape_kernels(KernelRegistry& registry) {
  registry.add({"aten::view_copy.out", 4, view_copy_out});
  registry.add({"aten::unsqueeze_copy.out", 4, unsqueeze_copy_out});
  registry.add({"aten::squeeze_copy.dims_out", 4, squeeze_copy_dims_out});
  registry.add({"aten::squeeze_copy.dim_out", 4, squeeze_copy_dim_out});
  registry.add({"aten::squeeze_copy.out", 3, squeeze_copy_out});
  registry.add({"aten::permute_copy.out", 4, permute_copy_out});
  registry.add({"aten::transpose_copy.int_out", 5, transpose_copy_int_out});
  registry.add({"aten::expand_copy.out", 5, expand_copy_out});
  registry.add({"aten::select_copy.int_out", 5, select_copy_int_out});
  registry.add({"aten::slice_copy.Tensor_out", 7, slice_copy_tensor_out});
  registry.add({"aten::cat.out", 4, cat_out});
  registry.add({"aten::stack.out", 4, stack_out});
  registry.add({"aten::split_with_sizes_copy.out", 5, split_with_sizes_copy_out});
  registry.add({"aten::split_copy.Tensor_out", 5, split_copy_tensor_out});
  registry.add({"aten::constant_pad_nd.out", 5, constant_pad_nd_out});
  registry.add({"aten::unbind_copy.int_out", 4, unbind_copy_int_out});
  registry.add({"aten::repeat.out", 4, repeat_out});
  registry.add({"aten::tril.out", 4, triangle<true>});
  registry.add({"aten::triu.out", 4, triangle<false>});
}

}  // namespace etna::kernels
