// Reductions over a set of dims (sum, mean, amax, amin), index reductions
// (argmax, argmin) and the running sum along one dim (cumsum).

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"

namespace etna::kernels {
namespace {

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

// The dtype a sum/mean result is computed with: the dtype argument if given
// (it must match out), else out's dtype, which is authoritative.
Status check_result_dtype(const OpArgs& op, const std::optional<ScalarType>& dtype, const Tensor& out,
                          size_t dtype_index) {
  ETNA_TRY(op.expect_supported_dtype(out, "out"));
  if (dtype && *dtype != out.dtype()) {
    return op.program_error(OpArgs::arg_label(dtype_index, "dtype") + " is " + std::string(dtype_name(*dtype)) +
                            " but out is " + out.describe());
  }
  return Status::ok();
}

// Sums (or averages) the reduced elements of self into out, reading self
// converted to the accumulator type of out's dtype.
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
  visit_real_dtype(self.dtype(), [&](auto in_tag) {
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
    if (floating) run(TypeTag<double>{});
    else run(TypeTag<int64_t>{});
  });
  return Status::ok();
}

Status sum_intlist_out(KernelArgs args) {
  OpArgs op("aten::sum.IntList_out", args);
  ETNA_TRY(op.expect_count(6));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(OptionalIntList dims, op.optional_int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(3, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_TRY(op.expect_supported_dtype(*self, "self"));
  ETNA_TRY(check_result_dtype(op, dtype, *out, 3));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims.items, self->rank(), "dim"));
  return sum_into(op, *self, mask, keepdim, *out, false);
}

Status check_mean_dtypes(const OpArgs& op, const Tensor& self, const std::optional<ScalarType>& dtype,
                         const Tensor& out, size_t dtype_index) {
  ETNA_TRY(op.expect_supported_dtype(self, "self"));
  ETNA_TRY(check_result_dtype(op, dtype, out, dtype_index));
  ETNA_TRY(op.expect_floating(out, "out"));
  if (!dtype && !is_floating_dtype(self.dtype())) {
    return op.program_error("mean of " + self.describe() + " needs a floating dtype argument");
  }
  return Status::ok();
}

Status mean_out(KernelArgs args) {
  OpArgs op("aten::mean.out", args);
  ETNA_TRY(op.expect_count(6));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(OptionalIntList dims, op.optional_int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(3, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_TRY(check_mean_dtypes(op, *self, dtype, *out, 3));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims.items, self->rank(), "dim"));
  return sum_into(op, *self, mask, keepdim, *out, true);
}

Status mean_dtype_out(KernelArgs args) {
  OpArgs op("aten::mean.dtype_out", args);
  ETNA_TRY(op.expect_count(4));
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
Status extreme_value(KernelArgs args, const char* key) {
  OpArgs op(key, args);
  ETNA_TRY(op.expect_count(5));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> dims, op.int_list_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_supported_dtype(*self, "self"));
  ETNA_TRY(op.expect_supported_dtype(*out, "out"));
  ETNA_TRY(op.expect_castable(self->dtype(), *out));
  ETNA_KERNEL_ASSIGN(auto mask, reduction_mask(op, dims, self->rank(), "dim"));
  const ReductionLayout layout = make_reduction_layout(*self, mask, keepdim);
  if (layout.reduced_count == 0 && layout.kept.numel() > 0) {
    return op.input_error("cannot reduce " + self->describe() + " over an empty dimension");
  }
  ETNA_TRY(op.prepare_output(*out, layout.out_shape));
  const void* in = self->data();
  void* result = out->data();
  visit_real_dtype(self->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const WriteFn<T> write = writer_for<T>(out->dtype());
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      bool first = true;
      T best{};
      reduce([&](int64_t offset) {
        const T v = load_element<T>(in, offset);
        if (first || replaces<kMax>(v, best)) best = v;
        first = false;
      });
      write(result, out_index, best);
    });
  });
  return Status::ok();
}

Status amax_out(KernelArgs args) { return extreme_value<true>(args, "aten::amax.out"); }
Status amin_out(KernelArgs args) { return extreme_value<false>(args, "aten::amin.out"); }

// --- argmax / argmin ---------------------------------------------------------------

template <bool kMax>
Status extreme_index(KernelArgs args, const char* key) {
  OpArgs op(key, args);
  ETNA_TRY(op.expect_count(5));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> dim, op.optional_int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool keepdim, op.bool_arg(2, "keepdim"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_supported_dtype(*self, "self"));
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
    return op.input_error("cannot take the index of an extreme of " + self->describe() +
                          " over an empty dimension");
  }
  ETNA_TRY(op.prepare_output(*out, layout.out_shape));
  const void* in = self->data();
  auto* result = out->data_as<int64_t>();
  visit_real_dtype(self->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_reduction(layout, [&](int64_t out_index, auto&& reduce) {
      int64_t position = 0;
      int64_t best_position = 0;
      T best{};
      reduce([&](int64_t offset) {
        const T v = load_element<T>(in, offset);
        if (position == 0 || replaces<kMax>(v, best)) {
          best = v;
          best_position = position;
        }
        ++position;
      });
      result[out_index] = best_position;
    });
  });
  return Status::ok();
}

Status argmax_out(KernelArgs args) { return extreme_index<true>(args, "aten::argmax.out"); }
Status argmin_out(KernelArgs args) { return extreme_index<false>(args, "aten::argmin.out"); }

// --- cumsum ----------------------------------------------------------------------

Status cumsum_out(KernelArgs args) {
  OpArgs op("aten::cumsum.out", args);
  ETNA_TRY(op.expect_count(5));
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(2, "dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_supported_dtype(*self, "self"));
  ETNA_TRY(check_result_dtype(op, dtype, *out, 2));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const Shape shape = Shape::of(*self);
  ETNA_TRY(op.prepare_output(*out, shape));
  const DimSplit split = split_at_dim(shape, self->rank() == 0 ? 0 : d);
  const void* in = self->data();
  void* result = out->data();
  visit_real_dtype(self->dtype(), [&](auto in_tag) {
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
  registry.add("aten::sum.IntList_out", sum_intlist_out, 6);
  registry.add("aten::mean.out", mean_out, 6);
  registry.add("aten::mean.dtype_out", mean_dtype_out, 4);
  registry.add("aten::amax.out", amax_out, 5);
  registry.add("aten::amin.out", amin_out, 5);
  registry.add("aten::argmax.out", argmax_out, 5);
  registry.add("aten::argmin.out", argmin_out, 5);
  registry.add("aten::cumsum.out", cumsum_out, 5);
}

}  // namespace etna::kernels
