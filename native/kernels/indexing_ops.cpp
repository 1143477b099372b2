// Operators driven by index tensors: gather, scatter (value), index_select,
// embedding, and advanced indexing (index.Tensor, index_put, index_put_).
// Every index is checked against the size of the dim it addresses before it
// is used.

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

bool is_index_dtype(ScalarType type) { return type == ScalarType::kLong || type == ScalarType::kInt; }

Status expect_index_dtype(const OpArgs& op, const Tensor& index, std::string_view name) {
  if (is_index_dtype(index.dtype())) return Status::ok();
  return op.program_error(std::string(name) + " must be int64 (or int32), got " + index.describe());
}

int64_t read_index(const Tensor& index, int64_t offset) {
  return index.dtype() == ScalarType::kLong ? load_element<int64_t>(index.data(), offset)
                                            : load_element<int32_t>(index.data(), offset);
}

Error index_out_of_range(const OpArgs& op, int64_t value, size_t dim, int64_t size) {
  return op.input_error("index " + std::to_string(value) + " is out of bounds for dim " + std::to_string(dim) +
                        " with size " + std::to_string(size));
}

// gather/scatter: index has self's rank and, outside `dim`, is no larger
// than self (or than `limit` for the dim sizes it must not exceed).
Status check_gather_shapes(const OpArgs& op, const Tensor& self, const Tensor& index, size_t dim) {
  if (index.rank() != self.rank()) {
    return op.input_error("index " + index.describe() + " must have the rank of self " + self.describe());
  }
  for (size_t d = 0; d < self.rank(); ++d) {
    if (d != dim && index.size(d) > self.size(d)) {
      return op.input_error("index " + index.describe() + " is larger than self " + self.describe() + " in dim " +
                            std::to_string(d));
    }
  }
  return Status::ok();
}

Status gather_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(Tensor * index, op.strided_input(2, "index"));
  ETNA_KERNEL_ASSIGN(bool sparse_grad, op.bool_arg(3, "sparse_grad"));
  (void)sparse_grad;  // only affects autograd
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_TRY(expect_index_dtype(op, *index, "index"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  ETNA_TRY(check_gather_shapes(op, *self, *index, d));
  const Shape shape = Shape::of(*index);
  ETNA_TRY(op.prepare_output(*out, shape, "out", false));
  const int64_t size = self->rank() == 0 ? 1 : self->size(d);
  const int64_t step = self->rank() == 0 ? 0 : self->stride(d);
  // self's strides without the gathered dim locate the rest of the element.
  Strides self_strides = strides_of(*self);
  if (self->rank() > 0) self_strides[d] = 0;
  const Strides index_strides = strides_of(*index);
  const Strides out_strides = strides_of(*out);
  const size_t element_size = self->element_size();
  const auto* src = static_cast<const uint8_t*>(self->data());
  auto* dst = static_cast<uint8_t*>(out->data());
  std::optional<int64_t> bad_index;
  for_each_offset<3>(shape, {self_strides.data(), index_strides.data(), out_strides.data()},
                     [&](const std::array<int64_t, 3>& offsets) {
                       const int64_t i = read_index(*index, offsets[1]);
                       if (i < 0 || i >= size) {
                         if (!bad_index) bad_index = i;
                         return;
                       }
                       std::memcpy(dst + offsets[2] * element_size, src + (offsets[0] + i * step) * element_size,
                                   element_size);
                     });
  if (bad_index) return index_out_of_range(op, *bad_index, d, size);
  return Status::ok();
}

Status scatter_value_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(Tensor * index, op.strided_input(2, "index"));
  ETNA_KERNEL_ASSIGN(Scalar value, op.scalar_arg(3, "value"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_TRY(expect_index_dtype(op, *index, "index"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  if (!value.fits(self->dtype())) {
    return op.input_error("value " + value.describe() + " does not fit dtype " +
                          std::string(dtype_name(self->dtype())));
  }
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  ETNA_TRY(check_gather_shapes(op, *self, *index, d));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*self), "out", false));
  copy_broadcast(*self, *out);
  const int64_t size = self->rank() == 0 ? 1 : self->size(d);
  const int64_t step = self->rank() == 0 ? 0 : out->stride(d);
  Strides out_strides = strides_of(*out);
  if (self->rank() > 0) out_strides[d] = 0;
  const Strides index_strides = strides_of(*index);
  std::optional<int64_t> bad_index;
  visit_element_dtype(out->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T fill = value.to<T>();
    void* data = out->data();
    for_each_offset<2>(Shape::of(*index), {out_strides.data(), index_strides.data()},
                       [&](const std::array<int64_t, 2>& offsets) {
                         const int64_t i = read_index(*index, offsets[1]);
                         if (i < 0 || i >= size) {
                           if (!bad_index) bad_index = i;
                           return;
                         }
                         store_element<T>(data, offsets[0] + i * step, fill);
                       });
  });
  if (bad_index) return index_out_of_range(op, *bad_index, d, size);
  return Status::ok();
}

Status index_select_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(Tensor * index, op.input(2, "index"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(expect_index_dtype(op, *index, "index"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  if (index->rank() > 1) return op.input_error("index must have rank 0 or 1, got " + index->describe());
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const auto count = static_cast<int64_t>(index->numel());
  Shape shape = Shape::of(*self);
  if (shape.rank == 0) {
    if (count != 1) return op.input_error("index of a rank-0 self must hold one element, got " + index->describe());
  } else {
    shape[d] = count;
  }
  ETNA_TRY(op.prepare_output(*out, shape));
  const DimSplit split = split_at_dim(Shape::of(*self), self->rank() == 0 ? 0 : d);
  const size_t row_bytes = static_cast<size_t>(split.inner) * self->element_size();
  const auto* src = static_cast<const uint8_t*>(self->data());
  auto* dst = static_cast<uint8_t*>(out->data());
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = read_index(*index, k);
    if (i < 0 || i >= split.size) return index_out_of_range(op, i, d, split.size);
  }
  for (int64_t o = 0; o < split.outer; ++o) {
    for (int64_t k = 0; k < count; ++k) {
      const int64_t i = read_index(*index, k);
      std::memcpy(dst + static_cast<size_t>(o * count + k) * row_bytes,
                  src + static_cast<size_t>(o * split.size + i) * row_bytes, row_bytes);
    }
  }
  return Status::ok();
}

Status embedding_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.input(0, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.strided_input(1, "indices"));
  ETNA_KERNEL_ASSIGN(int64_t padding_idx, op.int_arg(2, "padding_idx"));
  ETNA_KERNEL_ASSIGN(bool scale_grad_by_freq, op.bool_arg(3, "scale_grad_by_freq"));
  ETNA_KERNEL_ASSIGN(bool sparse, op.bool_arg(4, "sparse"));
  (void)padding_idx;  // padding_idx, scale_grad_by_freq and sparse only affect gradients
  (void)scale_grad_by_freq;
  (void)sparse;
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(5, "out"));
  ETNA_TRY(expect_index_dtype(op, *indices, "indices"));
  ETNA_TRY(op.expect_rank(*weight, "weight", 2));
  ETNA_TRY(op.expect_dtype(*out, "out", weight->dtype()));
  const Shape index_shape = Shape::of(*indices);
  if (index_shape.rank + 1 > kMaxTensorRank)
    return op.input_error("indices " + indices->describe() + " has too many dims");
  Shape shape = index_shape;
  shape[shape.rank++] = weight->size(1);
  ETNA_TRY(op.prepare_output(*out, shape));
  const int64_t rows = weight->size(0);
  const size_t row_bytes = static_cast<size_t>(weight->size(1)) * weight->element_size();
  const auto* src = static_cast<const uint8_t*>(weight->data());
  auto* dst = static_cast<uint8_t*>(out->data());
  const Strides index_strides = strides_of(*indices);
  std::optional<int64_t> bad_index;
  int64_t position = 0;
  for_each_offset<1>(index_shape, {index_strides.data()}, [&](const std::array<int64_t, 1>& offset) {
    const int64_t i = read_index(*indices, offset[0]);
    if (i < 0 || i >= rows) {
      if (!bad_index) bad_index = i;
    } else if (row_bytes > 0) {
      std::memcpy(dst + static_cast<size_t>(position) * row_bytes, src + static_cast<size_t>(i) * row_bytes, row_bytes);
    }
    ++position;
  });
  if (bad_index) return index_out_of_range(op, *bad_index, 0, rows);
  return Status::ok();
}

// --- advanced indexing ----------------------------------------------------------------

// How `target[indices]` walks target. The result shape combines the
// broadcast shape B of the index tensors with the dims nobody indexes; every
// position of B contributes one precomputed element offset.
struct IndexPlan {
  Shape result;
  Strides target_strides{};            // per result dim: target stride (0 on B dims)
  Strides position_strides{};          // per result dim: row-major stride into B (0 elsewhere)
  std::unique_ptr<int64_t[]> offsets;  // per B position: offset from the indexed dims
};

// One indexed dim: its index values laid out row-major over `shape`.
struct DimIndex {
  size_t dim = 0;
  Shape shape;
  std::vector<int64_t> values;
};

Strides broadcast_shape_strides(const Shape& shape, const Shape& target) {
  Strides strides{};
  const Strides own = row_major_strides(shape);
  const size_t offset = target.rank - shape.rank;
  for (size_t d = 0; d < shape.rank; ++d) strides[offset + d] = shape[d] == 1 ? 0 : own[d];
  return strides;
}

// A bool (or uint8) mask over target dims [dim, dim + mask rank) becomes one
// index array per covered dim holding the coordinates of its true elements.
Status expand_mask(const OpArgs& op, const Tensor& mask, size_t dim, const Tensor& target, std::string_view name,
                   std::vector<DimIndex>& entries) {
  const size_t rank = mask.rank();
  if (rank == 0) return op.unsupported(std::string(name) + ": rank-0 bool masks are not supported");
  if (dim + rank > target.rank()) {
    return op.input_error(std::string(name) + " mask " + mask.describe() + " covers more dims than target " +
                          target.describe());
  }
  for (size_t k = 0; k < rank; ++k) {
    if (mask.size(k) != target.size(dim + k)) {
      return op.input_error(std::string(name) + " mask " + mask.describe() + " does not match dims " +
                            std::to_string(dim) + ".." + std::to_string(dim + rank - 1) + " of " + target.describe());
    }
  }
  const Shape mask_shape = Shape::of(mask);
  const Strides mask_strides = strides_of(mask);
  std::vector<DimIndex> covered(rank);
  std::array<int64_t, kMaxTensorRank> coordinate{};
  for_each_offset<1>(mask_shape, {mask_strides.data()}, [&](const std::array<int64_t, 1>& offset) {
    if (load_element<uint8_t>(mask.data(), offset[0]) != 0) {
      for (size_t k = 0; k < rank; ++k) covered[k].values.push_back(coordinate[k]);
    }
    // Row-major coordinate of the next element.
    for (size_t k = rank; k-- > 0;) {
      if (++coordinate[k] < mask_shape[k]) break;
      coordinate[k] = 0;
    }
  });
  for (size_t k = 0; k < rank; ++k) {
    covered[k].dim = dim + k;
    covered[k].shape.rank = 1;
    covered[k].shape[0] = static_cast<int64_t>(covered[k].values.size());
    entries.push_back(std::move(covered[k]));
  }
  return Status::ok();
}

Result<IndexPlan> plan_advanced_index(const OpArgs& op, const Tensor& target, const std::vector<Tensor*>& indices,
                                      std::string_view name) {
  const size_t rank = target.rank();
  std::vector<DimIndex> entries;
  size_t dim = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::string label = std::string(name) + "[" + std::to_string(i) + "]";
    if (dim >= rank) {
      return op.input_error("too many indices (" + std::to_string(indices.size()) + ") for " + target.describe());
    }
    const Tensor* index = indices[i];
    if (!index) {
      ++dim;
      continue;
    }
    ETNA_TRY(op.check_readable(*index, label));
    if (index->dtype() == ScalarType::kBool || index->dtype() == ScalarType::kByte) {
      ETNA_TRY(expand_mask(op, *index, dim, target, label, entries));
      dim += index->rank();
      continue;
    }
    ETNA_TRY(expect_index_dtype(op, *index, label));
    DimIndex entry;
    entry.dim = dim++;
    entry.shape = Shape::of(*index);
    entry.values.reserve(index->numel());
    const Strides strides = strides_of(*index);
    for_each_offset<1>(entry.shape, {strides.data()}, [&](const std::array<int64_t, 1>& offset) {
      entry.values.push_back(read_index(*index, offset[0]));
    });
    entries.push_back(std::move(entry));
  }

  Shape broadcast;  // B
  for (const DimIndex& entry : entries) {
    ETNA_KERNEL_ASSIGN(broadcast, op.broadcast_shapes(broadcast, "indices", entry.shape, "indices"));
  }
  std::array<bool, kMaxTensorRank> indexed{};
  for (DimIndex& entry : entries) {
    const int64_t size = target.size(entry.dim);
    for (int64_t& v : entry.values) {
      if (v < -size || v >= size) return index_out_of_range(op, v, entry.dim, size);
      if (v < 0) v += size;
    }
    indexed[entry.dim] = true;
  }

  IndexPlan plan;
  // B can be much larger than any index tensor (e.g. [n, 1] with [1, n]), so
  // its size is checked and its table allocated without throwing.
  uint64_t positions_count = 1;
  for (size_t k = 0; k < broadcast.rank; ++k) {
    if (__builtin_mul_overflow(positions_count, static_cast<uint64_t>(broadcast[k]), &positions_count) ||
        positions_count > (uint64_t(1) << 40)) {
      return op.input_error("the index tensors broadcast to " + broadcast.to_string() + ", too many positions");
    }
  }
  plan.offsets.reset(new (std::nothrow) int64_t[positions_count]());
  if (!plan.offsets) {
    return op.input_error("not enough memory for the " + std::to_string(positions_count) + " index positions");
  }
  const Strides positions = row_major_strides(broadcast);
  for (const DimIndex& entry : entries) {
    const Strides from = broadcast_shape_strides(entry.shape, broadcast);
    const int64_t stride = target.stride(entry.dim);
    for_each_offset<2>(broadcast, {from.data(), positions.data()}, [&](const std::array<int64_t, 2>& offsets) {
      plan.offsets[offsets[1]] += entry.values[static_cast<size_t>(offsets[0])] * stride;
    });
  }

  // Indexed dims next to each other keep their place; otherwise B goes first.
  size_t first = rank, last = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (!indexed[d]) continue;
    if (first == rank) first = d;
    last = d;
  }
  bool adjacent = true;
  for (size_t d = first; first < rank && d <= last; ++d) adjacent = adjacent && indexed[d];
  const size_t b_position = first == rank ? 0 : (adjacent ? first : 0);
  size_t result_rank = broadcast.rank;
  for (size_t d = 0; d < rank; ++d) result_rank += indexed[d] ? 0 : 1;
  if (result_rank > kMaxTensorRank) return op.input_error("the indexing result would exceed the maximum rank");

  Shape& result = plan.result;
  auto push_plain_dim = [&](size_t d) {
    plan.target_strides[result.rank] = target.stride(d);
    result[result.rank++] = target.size(d);
  };
  for (size_t d = 0; d < b_position; ++d) {
    if (!indexed[d]) push_plain_dim(d);
  }
  for (size_t k = 0; k < broadcast.rank; ++k) {
    plan.position_strides[result.rank] = broadcast[k] == 1 ? 0 : positions[k];
    result[result.rank++] = broadcast[k];
  }
  for (size_t d = b_position; d < rank; ++d) {
    if (!indexed[d]) push_plain_dim(d);
  }
  return plan;
}

template <typename T>
T accumulate_value(T current, T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return current || value;
  } else if constexpr (is_16bit_float_v<T>) {
    return convert_value<T>(widen_to_float(current) + widen_to_float(value));
  } else {
    return wrapping_add(current, value);
  }
}

// target[indices] = values (or += with accumulate), values broadcasting.
Status put_values(const OpArgs& op, Tensor& target, const std::vector<Tensor*>& indices, const Tensor& values,
                  bool accumulate) {
  ETNA_KERNEL_ASSIGN(IndexPlan plan, plan_advanced_index(op, target, indices, "indices"));
  ETNA_KERNEL_ASSIGN(Shape shape, op.broadcast_shapes(Shape::of(values), "values", plan.result, "indexed shape"));
  if (shape != plan.result) {
    return op.input_error("values " + values.describe() + " do not broadcast to the indexed shape " +
                          plan.result.to_string());
  }
  if (values.dtype() != target.dtype()) {
    return op.program_error("values " + values.describe() + " must have self's dtype " +
                            std::string(dtype_name(target.dtype())));
  }
  ETNA_TRY(op.expect_element_dtype(target, "self"));
  const Strides value_strides = broadcast_strides(values, plan.result);
  visit_element_dtype(target.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    void* dst = target.data();
    const void* src = values.data();
    for_each_offset<3>(plan.result, {plan.target_strides.data(), plan.position_strides.data(), value_strides.data()},
                       [&](const std::array<int64_t, 3>& offsets) {
                         const int64_t at = offsets[0] + plan.offsets[offsets[1]];
                         const T v = load_element<T>(src, offsets[2]);
                         store_element<T>(dst, at, accumulate ? accumulate_value(load_element<T>(dst, at), v) : v);
                       });
  });
  return Status::ok();
}

Status index_put_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> indices, op.optional_tensor_list_arg(1, "indices"));
  ETNA_KERNEL_ASSIGN(Tensor * values, op.strided_input(2, "values"));
  ETNA_KERNEL_ASSIGN(bool accumulate, op.bool_arg(3, "accumulate"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*self), "out", false));
  copy_broadcast(*self, *out);
  return put_values(op, *out, indices, *values, accumulate);
}

Status index_put_in_place(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> indices, op.optional_tensor_list_arg(1, "indices"));
  ETNA_KERNEL_ASSIGN(Tensor * values, op.strided_input(2, "values"));
  ETNA_KERNEL_ASSIGN(bool accumulate, op.bool_arg(3, "accumulate"));
  ETNA_TRY(put_values(op, *self, indices, *values, accumulate));
  return op.return_self(4);
}

Status index_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<Tensor*> indices, op.optional_tensor_list_arg(1, "indices"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_KERNEL_ASSIGN(IndexPlan plan, plan_advanced_index(op, *self, indices, "indices"));
  ETNA_TRY(op.prepare_output(*out, plan.result));
  const Strides out_strides = row_major_strides(plan.result);
  const size_t element_size = self->element_size();
  const auto* src = static_cast<const uint8_t*>(self->data());
  auto* dst = static_cast<uint8_t*>(out->data());
  for_each_offset<3>(plan.result, {plan.target_strides.data(), plan.position_strides.data(), out_strides.data()},
                     [&](const std::array<int64_t, 3>& offsets) {
                       const int64_t at = offsets[0] + plan.offsets[offsets[1]];
                       std::memcpy(dst + offsets[2] * element_size, src + at * element_size, element_size);
                     });
  return Status::ok();
}

}  // namespace

void register_indexing_kernels(KernelRegistry& registry) {
  registry.add({"aten::gather.out", 6, gather_out});
  registry.add({"aten::scatter.value_out", 6, scatter_value_out});
  registry.add({"aten::index_select.out", 5, index_select_out});
  registry.add({"aten::embedding.out", 7, embedding_out});
  registry.add({"aten::index_put.out", 6, index_put_out});
  registry.add({"aten::index_put_", 5, index_put_in_place});
  registry.add({"aten::index.Tensor_out", 4, index_tensor_out});
}

}  // namespace etna::kernels
