// Reductions over a set of dims (sum, mean, amax, amin, any, var_mean),
// index reductions (argmax, argmin, max.dim, min.dim, topk) and the running
// sum along one dim (cumsum).

#include <algorithm>
#include <cmath>
#include <limits>
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

// The dtype a sum/mean result is computed with: the dtype argument if given
// (it must match out), else out's dtype, which is authoritative.
Status check_result_dtype(const OpArgs& op, const std::optional<ScalarType>& dtype, const Tensor& out,
                          size_t dtype_index) {
  ETNA_TRY(op.expect_element_dtype(out, "out"));
  if (dtype && *dtype != out.dtype()) {
    return op.program_error(OpArgs::arg_label(dtype_index, "dtype") + " is " + std::string(dtype_name(*dtype)) +
                            " but out is " + out.describe());
  }
  return Status::ok();
}

// Sums (or averages) the reduced elements of self into out, reading self
// converted to the accumulator type of out's dtype: float for float16 and
// bfloat16 (PyTorch and ExecuTorch sum and divide those in float32, so a
// row past the 16-bit range still averages to a finite value, and one past
// float32's overflows as theirs does), double for the other float dtypes;
// each result is rounded once when stored.
Status sum_into(const OpArgs& op, const Tensor& self, const std::array<bool, kMaxTensorRank>& mask, bool keepdim,
                Tensor& out, bool average) {
  const ReductionLayout layout = make_reduction_layout(self, mask, keepdim);
  ETNA_TRY(op.prepare_output(out, layout.out_shape));
  // Walk self in memory order, adding each element into its result's
  // accumulator: cache-friendly whichever dims are reduced, and each result
  // still sums its elements in index order.
  const Shape shape = Shape::of(self);
  const Strides in_strides = strides_of(self);
  const Strides kept_strides = row_major_strides(layout.kept);
  Strides acc_strides{};
  for (size_t d = 0, k = 0; d < shape.rank; ++d) acc_strides[d] = mask[d] ? 0 : kept_strides[k++];
  const auto results = static_cast<size_t>(layout.kept.numel());
  const void* in = self.data();
  void* result = out.data();
  const bool floating = is_floating_dtype(out.dtype());
  visit_element_dtype(self.dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    auto run = [&](auto acc_tag) {
      using Acc = typename decltype(acc_tag)::type;
      std::vector<Acc> acc(results, Acc(0));
      for_each_offset<2>(shape, {in_strides.data(), acc_strides.data()}, [&](const std::array<int64_t, 2>& offsets) {
        Acc& total = acc[static_cast<size_t>(offsets[1])];
        total = wrapping_add(total, convert_value<Acc>(load_element<T>(in, offsets[0])));
      });
      const WriteFn<Acc> write = writer_for<Acc>(out.dtype());
      for (size_t i = 0; i < results; ++i) {
        Acc value = acc[i];
        if constexpr (std::is_floating_point_v<Acc>) {
          if (average) value /= static_cast<Acc>(layout.reduced_count);
        }
        write(result, static_cast<int64_t>(i), value);
      }
    };
    if (is_16bit_float_dtype(out.dtype())) run(TypeTag<float>{});
    else if (floating) run(TypeTag<double>{});
    else run(TypeTag<int64_t>{});
  });
  return Status::ok();
}

Status check_mean_dtypes(const OpArgs& op, const Tensor& self, const std::optional<ScalarType>& dtype,
                         const Tensor& out, size_t dtype_index) {
  ETNA_TRY(op.expect_element_dtype(self, "self"));
  ETNA_TRY(check_result_dtype(op, dtype, out, dtype_index));
  ETNA_TRY(op.expect_any_floating(out, "out"));
  if (!dtype && !is_floating_dtype(self.dtype())) {
    return op.program_error("mean of " + self.describe() + " needs a floating dtype argument");
  }
  return Status::ok();
}

// sum.IntList_out and mean.out: [self, dim, keepdim, dtype, out, ret].
Status sum_over_dims(const OpArgs& op, bool mean) {
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(OptionalIntList dims, op.optional_int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(3, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  if (mean) {
    ETNA_TRY(check_mean_dtypes(op, *self, dtype, *out, 3));
  } else {
    ETNA_TRY(op.expect_element_dtype(*self, "self"));
    ETNA_TRY(check_result_dtype(op, dtype, *out, 3));
  }
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims.items, self->rank(), "dim"));
  return sum_into(op, *self, mask, keepdim, *out, mean);
}

Status sum_intlist_out(KernelArgs args) { return sum_over_dims(OpArgs(args), false); }
Status mean_out(KernelArgs args) { return sum_over_dims(OpArgs(args), true); }

Status mean_dtype_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(1, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_TRY(check_mean_dtypes(op, *self, dtype, *out, 1));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, {}, self->rank(), "dim"));
  return sum_into(op, *self, mask, false, *out, true);
}

// --- amax / amin -------------------------------------------------------------------

// Keeps the larger (or smaller) value; NaN wins and then stays.
template <bool kMax, typename T>
bool replaces(T candidate, T current) {
  if (is_nan_value(current)) return false;
  if (is_nan_value(candidate)) return true;
  return kMax ? candidate > current : candidate < current;
}

template <bool kMax>
Status extreme_value(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> dims, op.int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(op.expect_element_dtype(*out, "out"));
  ETNA_TRY(op.expect_castable(self->dtype(), *out));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims, self->rank(), "dim"));
  const ReductionLayout layout = make_reduction_layout(*self, mask, keepdim);
  if (layout.reduced_count == 0 && layout.kept.numel() > 0) {
    return op.input_error("cannot reduce " + self->describe() + " over an empty dimension");
  }
  ETNA_TRY(op.prepare_output(*out, layout.out_shape));
  const void* in = self->data();
  void* result = out->data();
  visit_element_dtype(self->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = value_type_t<T>;
    const WriteFn<V> write = writer_for<V>(out->dtype());
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      bool first = true;
      V best{};
      reduce([&](int64_t offset) {
        const V v = load_value<T>(in, offset);
        if (first || replaces<kMax>(v, best)) best = v;
        first = false;
      });
      write(result, out_index, best);
    });
  });
  return Status::ok();
}

// --- argmax / argmin ---------------------------------------------------------------

// For each reduction of `layout`, the position of its first extreme element
// (NaN wins) goes to `index_data` and, when `value_data` is given, the
// element itself to `value_data` in self's dtype.
template <bool kMax>
void find_extremes(const ReductionLayout& layout, const Tensor& self, void* value_data, int64_t* index_data) {
  const void* in = self.data();
  visit_element_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = value_type_t<T>;
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      int64_t position = 0;
      int64_t best_position = 0;
      V best{};
      reduce([&](int64_t offset) {
        const V v = load_value<T>(in, offset);
        if (position == 0 || replaces<kMax>(v, best)) {
          best = v;
          best_position = position;
        }
        ++position;
      });
      if (value_data) store_value<T>(value_data, out_index, best);
      index_data[out_index] = best_position;
    });
  });
}

template <bool kMax>
Status extreme_index(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> dim, op.optional_int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(op.expect_dtype(*out, "out", ScalarType::kLong));
  std::array<bool, kMaxTensorRank> mask{};
  if (dim) {
    ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(*dim, self->rank(), "dim"));
    if (self->rank() > 0) mask[d] = true;
  } else {
    // No dim: the index into the flattened tensor.
    for (size_t d = 0; d < self->rank(); ++d) mask[d] = true;
  }
  const ReductionLayout layout = make_reduction_layout(*self, mask, keepdim);
  if (layout.reduced_count == 0) {
    return op.input_error("cannot take the index of an extreme of " + self->describe() + " over an empty dimension");
  }
  ETNA_TRY(op.prepare_output(*out, layout.out_shape));
  find_extremes<kMax>(layout, *self, nullptr, out->data_as<int64_t>());
  return Status::ok();
}

// --- max.dim / min.dim ------------------------------------------------------------

// The extreme value along one dim and its index: NaN wins, ties keep the
// first index (ExecuTorch's rule, as for argmax).
template <bool kMax>
Status extreme_along_dim(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  // The schema's out names: (max, max_values) and (min, min_indices); the
  // second holds the indices in both.
  const char* values_name = kMax ? "max" : "min";
  const char* indices_name = kMax ? "max_values" : "min_indices";
  ETNA_KERNEL_ASSIGN(Tensor * values, op.output(3, values_name));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.output(4, indices_name));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(op.expect_dtype(*values, values_name, self->dtype()));
  ETNA_TRY(op.expect_dtype(*indices, indices_name, ScalarType::kLong));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, {dim}, self->rank(), "dim"));
  const ReductionLayout layout = make_reduction_layout(*self, mask, keepdim);
  if (layout.reduced_count == 0 && layout.kept.numel() > 0) {
    return op.input_error("cannot reduce " + self->describe() + " over an empty dimension");
  }
  ETNA_TRY(op.prepare_output(*values, layout.out_shape, values_name));
  ETNA_TRY(op.prepare_output(*indices, layout.out_shape, indices_name));
  find_extremes<kMax>(layout, *self, values->data(), indices->data_as<int64_t>());
  return Status::ok();
}

// --- topk --------------------------------------------------------------------------------

// NaN orders above every number (ExecuTorch's comparison for topk).
template <typename T>
bool nan_last_less(T a, T b) {
  return (!is_nan_value(a) && is_nan_value(b)) || a < b;
}

// The k largest (or smallest) elements along dim and their indices, always
// in sorted order (ExecuTorch leaves the order unspecified when sorted is
// false); equal values keep ascending index order.
Status topk_values(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t k, op.int_arg(1, "k"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(2, "dim"));
  ETNA_KERNEL_ASSIGN(bool largest, op.bool_arg(3, "largest"));
  ETNA_KERNEL_ASSIGN(bool sorted, op.bool_arg(4, "sorted"));
  (void)sorted;  // results are always sorted, which satisfies both settings
  ETNA_KERNEL_ASSIGN(Tensor * values, op.output(5, "values"));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.output(6, "indices"));
  if (self->dtype() == ScalarType::kBool) return op.program_error("self must not be bool, got " + self->describe());
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(op.expect_dtype(*values, "values", self->dtype()));
  ETNA_TRY(op.expect_dtype(*indices, "indices", ScalarType::kLong));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const int64_t size = self->rank() == 0 ? 1 : self->size(d);
  if (k < 0 || k > size) {
    return op.input_error("k " + std::to_string(k) + " is out of range [0, " + std::to_string(size) + "] for dim " +
                          std::to_string(d) + " of self " + self->describe());
  }
  std::array<bool, kMaxTensorRank> mask{};
  if (self->rank() > 0) mask[d] = true;
  const ReductionLayout layout = make_reduction_layout(*self, mask, true);
  Shape shape = layout.out_shape;
  if (shape.rank > 0) shape[d] = k;
  ETNA_TRY(op.prepare_output(*values, shape, "values"));
  ETNA_TRY(op.prepare_output(*indices, shape, "indices"));
  if (k == 0) return Status::ok();
  // Results of one reduction sit at (outer * k + j) * inner + i, where the
  // reduction's own index is outer * inner + i.
  const int64_t inner = self->rank() == 0 ? 1 : split_at_dim(shape, d).inner;
  const void* in = self->data();
  void* value_data = values->data();
  auto* index_data = indices->data_as<int64_t>();
  visit_element_dtype(self->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = value_type_t<T>;
    std::vector<std::pair<V, int64_t>> row;
    row.reserve(static_cast<size_t>(size));
    auto before = [largest](const std::pair<V, int64_t>& a, const std::pair<V, int64_t>& b) {
      if (largest ? nan_last_less(b.first, a.first) : nan_last_less(a.first, b.first)) return true;
      if (largest ? nan_last_less(a.first, b.first) : nan_last_less(b.first, a.first)) return false;
      return a.second < b.second;
    };
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      row.clear();
      reduce([&](int64_t offset) { row.emplace_back(load_value<T>(in, offset), static_cast<int64_t>(row.size())); });
      std::partial_sort(row.begin(), row.begin() + k, row.end(), before);
      const int64_t outer = out_index / inner, i = out_index % inner;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (outer * k + j) * inner + i;
        store_value<T>(value_data, at, row[static_cast<size_t>(j)].first);
        index_data[at] = row[static_cast<size_t>(j)].second;
      }
    });
  });
  return Status::ok();
}

// --- var_mean --------------------------------------------------------------------------

// Variance sum((x - mean)^2) / (N - correction) and mean over the reduced
// dims (None or [] = all). Like ExecuTorch, both are NaN when N is 0 or
// N - correction is not positive.
Status var_mean_correction_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(OptionalIntList dims, op.optional_int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(std::optional<Scalar> correction, op.optional_scalar_arg(2, "correction"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(3, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * var_out, op.output(4, "out0"));
  ETNA_KERNEL_ASSIGN(Tensor * mean_out, op.output(5, "out1"));
  ETNA_TRY(op.expect_floating(*self, "self"));
  ETNA_TRY(op.expect_floating(*var_out, "out0"));
  ETNA_TRY(op.expect_dtype(*mean_out, "out1", var_out->dtype()));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims.items, self->rank(), "dim"));
  const ReductionLayout layout = make_reduction_layout(*self, mask, keepdim);
  ETNA_TRY(op.prepare_output(*var_out, layout.out_shape, "out0"));
  ETNA_TRY(op.prepare_output(*mean_out, layout.out_shape, "out1"));
  const double count = static_cast<double>(layout.reduced_count);
  const double denominator = count - (correction ? correction->to<double>() : 1.0);
  const bool undefined = layout.reduced_count == 0 || !(denominator > 0);
  const void* in = self->data();
  visit_floating_dtype(var_out->dtype(), [&](auto out_tag) {
    using R = typename decltype(out_tag)::type;
    R* var_data = var_out->data_as<R>();
    R* mean_data = mean_out->data_as<R>();
    visit_floating_dtype(self->dtype(), [&](auto in_tag) {
      using T = typename decltype(in_tag)::type;
      for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
        if (undefined) {
          var_data[out_index] = mean_data[out_index] = std::numeric_limits<R>::quiet_NaN();
          return;
        }
        double sum = 0;
        reduce([&](int64_t offset) { sum += static_cast<double>(load_element<T>(in, offset)); });
        const double mean = sum / count;
        double squares = 0;
        reduce([&](int64_t offset) {
          const double d = static_cast<double>(load_element<T>(in, offset)) - mean;
          squares += d * d;
        });
        mean_data[out_index] = static_cast<R>(mean);
        var_data[out_index] = static_cast<R>(squares / denominator);
      });
    });
  });
  return Status::ok();
}

// --- any -----------------------------------------------------------------------------

// Whether any reduced element is non-zero (NaN counts); an empty reduction
// is false. out is bool or uint8, as in ExecuTorch.
Status any_into(const OpArgs& op, const Tensor& self, const std::array<bool, kMaxTensorRank>& mask, bool keepdim,
                Tensor& out) {
  ETNA_TRY(op.expect_element_dtype(self, "self"));
  if (out.dtype() != ScalarType::kBool && out.dtype() != ScalarType::kByte) {
    return op.program_error("out must be bool or uint8, got " + out.describe());
  }
  const ReductionLayout layout = make_reduction_layout(self, mask, keepdim);
  ETNA_TRY(op.prepare_output(out, layout.out_shape));
  const void* in = self.data();
  auto* result = static_cast<uint8_t*>(out.data());
  visit_element_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using V = value_type_t<T>;
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      bool found = false;
      reduce([&](int64_t offset) { found = found || load_value<T>(in, offset) != V(0); });
      result[out_index] = found ? 1 : 0;
    });
  });
  return Status::ok();
}

Status any_all_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, {}, self->rank(), "dim"));
  return any_into(op, *self, mask, false, *out);
}

Status any_dims_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(OptionalIntList dims, op.optional_int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  // None reduces every dim; an empty list (ExecuTorch's reading) reduces
  // none, mapping each element to its truth value.
  std::array<bool, kMaxTensorRank> mask{};
  if (!dims.present || !dims.items.empty()) {
    ETNA_KERNEL_ASSIGN(mask, reduction_mask(op, dims.items, self->rank(), "dim"));
  }
  return any_into(op, *self, mask, keepdim, *out);
}

Status any_dim_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, {dim}, self->rank(), "dim"));
  return any_into(op, *self, mask, keepdim, *out);
}

// --- cumsum ----------------------------------------------------------------------

Status cumsum_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(2, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_element_dtype(*self, "self"));
  ETNA_TRY(check_result_dtype(op, dtype, *out, 2));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const Shape shape = Shape::of(*self);
  ETNA_TRY(op.prepare_output(*out, shape));
  const DimSplit split = split_at_dim(shape, self->rank() == 0 ? 0 : d);
  const void* in = self->data();
  void* result = out->data();
  visit_element_dtype(self->dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    auto run = [&](auto acc_tag) {
      using Acc = typename decltype(acc_tag)::type;
      const WriteFn<Acc> write = writer_for<Acc>(out->dtype());
      std::vector<Acc> running(static_cast<size_t>(split.inner));
      for (int64_t o = 0; o < split.outer; ++o) {
        std::fill(running.begin(), running.end(), Acc(0));
        for (int64_t k = 0; k < split.size; ++k) {
          const int64_t row = (o * split.size + k) * split.inner;
          for (int64_t i = 0; i < split.inner; ++i) {
            Acc& acc = running[static_cast<size_t>(i)];
            acc = wrapping_add(acc, convert_value<Acc>(load_element<T>(in, row + i)));
            write(result, row + i, acc);
          }
        }
      }
    };
    if (is_floating_dtype(out->dtype())) run(TypeTag<double>{});
    else run(TypeTag<int64_t>{});
  });
  return Status::ok();
}

}  // namespace

void register_reduction_kernels(KernelRegistry& registry) {
  registry.add({"aten::sum.IntList_out", 6, sum_intlist_out});
  registry.add({"aten::mean.out", 6, mean_out});
  registry.add({"aten::mean.dtype_out", 4, mean_dtype_out});
  registry.add({"aten::amax.out", 5, extreme_value<true>});
  registry.add({"aten::amin.out", 5, extreme_value<false>});
  registry.add({"aten::argmax.out", 5, extreme_index<true>});
  registry.add({"aten::argmin.out", 5, extreme_index<false>});
  registry.add({"aten::cumsum.out", 5, cumsum_out});
  registry.add({"aten::any.all_out", 3, any_all_out});
  registry.add({"aten::max.dim_max", 6, extreme_along_dim<true>});
  registry.add({"aten::min.dim_min", 6, extreme_along_dim<false>});
  registry.add({"aten::var_mean.correction_out", 7, var_mean_correction_out});
  registry.add({"aten::topk.values", 8, topk_values});
  registry.add({"aten::any.dims_out", 5, any_dims_out});
  registry.add({"aten::any.out", 5, any_dim_out});
}

}  // namespace etna::kernels
