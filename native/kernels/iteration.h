// Walking tensors element by element: strided/broadcast iteration, the
// generic elementwise map with dtype conversion, reductions and dim splits.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/kernel_shape.h"
#include "kernels/scalar.h"

namespace etna::kernels {

using Strides = std::array<int64_t, kMaxTensorRank>;

// The tensor's own strides in a Strides array.
Strides strides_of(const Tensor& tensor);

// Strides of `tensor` viewed at shape `target` (right-aligned; dims that are
// broadcast get stride 0). The caller has checked broadcastability.
Strides broadcast_strides(const Tensor& tensor, const Shape& target);

// Calls f(offsets) once per element of `shape`, in row-major order, where
// offsets[k] = base[k] + sum_d index[d] * strides[k][d] (element units).
template <size_t N, typename F>
void for_each_offset(const Shape& shape, const std::array<const int64_t*, N>& strides,
                     const std::array<int64_t, N>& base, F&& f) {
  for (size_t d = 0; d < shape.rank; ++d) {
    if (shape[d] == 0) return;
  }
  if (shape.rank == 0) {
    f(base);
    return;
  }
  const size_t last = shape.rank - 1;
  const int64_t inner = shape[last];
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = strides[k][last];
  std::array<int64_t, kMaxTensorRank> counter{};
  std::array<int64_t, N> row = base;
  for (;;) {
    std::array<int64_t, N> offsets = row;
    for (int64_t i = 0; i < inner; ++i) {
      f(static_cast<const std::array<int64_t, N>&>(offsets));
      for (size_t k = 0; k < N; ++k) offsets[k] += inner_strides[k];
    }
    // Advance the outer dims like an odometer.
    size_t d = last;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++counter[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) row[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) row[k] -= strides[k][d] * (shape[d] - 1);
      counter[d] = 0;
    }
  }
}

template <size_t N, typename F>
void for_each_offset(const Shape& shape, const std::array<const int64_t*, N>& strides, F&& f) {
  for_each_offset<N>(shape, strides, std::array<int64_t, N>{}, std::forward<F>(f));
}

namespace detail {

template <typename C, size_t N, typename F, size_t... I>
auto apply_read(F& f, const std::array<ReadFn<C>, N>& readers, const std::array<const void*, N>& data,
                const std::array<int64_t, N + 1>& offsets, std::index_sequence<I...>) {
  return f(readers[I](data[I], offsets[I])...);
}

template <typename C, size_t N, typename F, size_t... I>
auto apply_typed(F& f, const std::array<const void*, N>& data, int64_t index, std::index_sequence<I...>) {
  return f(load_element<C>(data[I], index)...);
}

template <typename C, size_t N, typename F, size_t... I>
auto apply_typed_strided(F& f, const std::array<const void*, N>& data, const std::array<int64_t, N + 1>& offsets,
                         std::index_sequence<I...>) {
  return f(load_element<C>(data[I], offsets[I])...);
}

}  // namespace detail

// out[i] = f(inputs[0][i], ..., inputs[N-1][i]) with broadcasting. Inputs are
// read converted to C, f returns R, which is converted to out's dtype. `out`
// must already have the broadcast shape, and every dtype must be an element
// dtype (the caller checked). When the dtypes already are C and R the loops
// load and store directly (flat when the shapes also match and are
// row-major); otherwise each element goes through a dtype conversion
// function (the path float16/bfloat16 take, with C = float).
template <typename C, typename R, size_t N, typename F>
void map_elements(const std::array<const Tensor*, N>& inputs, Tensor& out, F&& f) {
  const Shape shape = Shape::of(out);
  std::array<const void*, N> data;
  bool typed = out.dtype() == dtype_of<R>();
  bool direct = is_row_major(out);
  for (size_t k = 0; k < N; ++k) {
    data[k] = inputs[k]->data();
    typed = typed && inputs[k]->dtype() == dtype_of<C>();
    direct = direct && Shape::of(*inputs[k]) == shape && is_row_major(*inputs[k]);
  }
  if (typed && direct) {
    void* out_data = out.data();
    const int64_t n = shape.numel();
    for (int64_t i = 0; i < n; ++i) {
      store_element<R>(out_data, i, detail::apply_typed<C, N>(f, data, i, std::make_index_sequence<N>{}));
    }
    return;
  }
  std::array<ReadFn<C>, N> readers;
  std::array<Strides, N + 1> strides;
  std::array<const int64_t*, N + 1> stride_ptrs;
  for (size_t k = 0; k < N; ++k) {
    readers[k] = reader_for<C>(inputs[k]->dtype());
    strides[k] = broadcast_strides(*inputs[k], shape);
    stride_ptrs[k] = strides[k].data();
  }
  for (size_t d = 0; d < shape.rank; ++d) strides[N][d] = out.stride(d);
  stride_ptrs[N] = strides[N].data();
  void* out_data = out.data();
  if (typed) {
    for_each_offset<N + 1>(shape, stride_ptrs, [&](const std::array<int64_t, N + 1>& offsets) {
      store_element<R>(out_data, offsets[N],
                       detail::apply_typed_strided<C, N>(f, data, offsets, std::make_index_sequence<N>{}));
    });
    return;
  }
  const WriteFn<R> writer = writer_for<R>(out.dtype());
  for_each_offset<N + 1>(shape, stride_ptrs, [&](const std::array<int64_t, N + 1>& offsets) {
    writer(out_data, offsets[N], detail::apply_read<C, N>(f, readers, data, offsets, std::make_index_sequence<N>{}));
  });
}

// float16 / bfloat16 tensors for kernels written against stored elements.
// The tensor's elements widened to float, in memory order (every dim order is
// dense, so the tensor's strides index the copy too).
std::vector<float> widen_elements(const Tensor& tensor);
// Rounds `values` (memory order) into out's 16-bit float elements.
void narrow_elements(const std::vector<float>& values, Tensor& out);

// Calls f(TypeTag<T>{}, in, out) where in[k] is inputs[k]'s data as const T*
// (nullptr for a null input) and out[k] is outputs[k]'s data as T*. All
// tensors have dtype `type`. `visit(type, g)` picks T among the dtypes the
// kernel computes on directly; float16 and bfloat16 run with T = float on
// widened copies and every result is rounded into its output once at the end.
// Returns false when neither applies.
template <size_t N, size_t M, typename Visit, typename F>
bool visit_stored_or_widened(ScalarType type, Visit&& visit, const std::array<const Tensor*, N>& inputs,
                             const std::array<Tensor*, M>& outputs, F&& f) {
  if (is_16bit_float_dtype(type)) {
    std::array<std::vector<float>, N> wide_in;
    std::array<const float*, N> in{};
    for (size_t k = 0; k < N; ++k) {
      if (!inputs[k]) continue;
      wide_in[k] = widen_elements(*inputs[k]);
      in[k] = wide_in[k].data();
    }
    std::array<std::vector<float>, M> wide_out;
    std::array<float*, M> out{};
    for (size_t k = 0; k < M; ++k) {
      wide_out[k].resize(outputs[k]->numel());
      out[k] = wide_out[k].data();
    }
    f(TypeTag<float>{}, in, out);
    for (size_t k = 0; k < M; ++k) narrow_elements(wide_out[k], *outputs[k]);
    return true;
  }
  return visit(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::array<const T*, N> in{};
    for (size_t k = 0; k < N; ++k) in[k] = inputs[k] ? inputs[k]->template data_as<const T>() : nullptr;
    std::array<T*, M> out{};
    for (size_t k = 0; k < M; ++k) out[k] = outputs[k]->template data_as<T>();
    f(tag, in, out);
  });
}

// Copies `src` into `dst`, broadcasting src to dst's shape and converting
// dtypes, through both tensors' strides. The caller checked that src
// broadcasts to dst and, when the dtypes differ, that both are element dtypes.
void copy_broadcast(const Tensor& src, Tensor& dst);

// Copies `shape` elements between strided layouts, converting from
// src_type to dst_type (equal dtypes of any kind, or two element dtypes).
void copy_strided(const Shape& shape, ScalarType src_type, const void* src, const int64_t* src_strides,
                  int64_t src_base, ScalarType dst_type, void* dst, const int64_t* dst_strides, int64_t dst_base);

// Copies `shape` elements of `element_size` bytes between strided layouts.
void copy_strided_bytes(const Shape& shape, size_t element_size, const void* src, const int64_t* src_strides,
                        int64_t src_base, void* dst, const int64_t* dst_strides, int64_t dst_base);

// Writes `value`, converted to out's dtype (an element dtype, checked by the
// caller), into every element of `out`.
void fill_tensor(Tensor& out, const Scalar& value);

// How a reduction walks its input: the result shape, the kept dims (outer
// loop, in order, so results come out row-major) and the reduced dims.
struct ReductionLayout {
  Shape out_shape;
  Shape kept;
  Strides kept_strides{};
  Shape reduced;
  Strides reduced_strides{};
  int64_t reduced_count = 1;
};
ReductionLayout make_reduction_layout(const Tensor& input, const std::array<bool, kMaxTensorRank>& reduce_dim,
                                      bool keepdim);

// Calls visit(out_index, reduce) once per result element, where
// reduce(g) calls g(input_offset) for each reduced element.
template <typename Visit>
void for_each_reduction(const ReductionLayout& layout, Visit&& visit) {
  int64_t out_index = 0;
  for_each_offset<1>(layout.kept, {layout.kept_strides.data()}, [&](const std::array<int64_t, 1>& base) {
    auto reduce = [&](auto&& g) {
      for_each_offset<1>(layout.reduced, {layout.reduced_strides.data()}, base,
                         [&](const std::array<int64_t, 1>& offset) { g(offset[0]); });
    };
    visit(out_index++, reduce);
  });
}

// A row-major shape seen as [outer, size, inner] around one dim.
struct DimSplit {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};
DimSplit split_at_dim(const Shape& shape, size_t dim);

}  // namespace etna::kernels
