#include "kernels/iteration.h"

#include <cstring>

namespace etna::kernels {

Strides strides_of(const Tensor& tensor) {
  Strides strides{};
  for (size_t d = 0; d < tensor.rank(); ++d) strides[d] = tensor.stride(d);
  return strides;
}

Strides broadcast_strides(const Tensor& tensor, const Shape& target) {
  Strides strides{};
  const size_t offset = target.rank - tensor.rank();
  for (size_t d = 0; d < tensor.rank(); ++d) {
    strides[offset + d] = tensor.size(d) == 1 ? 0 : tensor.stride(d);
  }
  return strides;
}

void copy_strided_bytes(const Shape& shape, size_t element_size, const void* src, const int64_t* src_strides,
                        int64_t src_base, void* dst, const int64_t* dst_strides, int64_t dst_base) {
  // Elements of 1, 2, 4 or 8 bytes move as one word each.
  const auto copy_words = [&](auto word) {
    using Word = decltype(word);
    const auto* src_words = static_cast<const Word*>(src);
    auto* dst_words = static_cast<Word*>(dst);
    for_each_offset<2>(shape, {src_strides, dst_strides}, {src_base, dst_base},
                       [&](const std::array<int64_t, 2>& offsets) { dst_words[offsets[1]] = src_words[offsets[0]]; });
  };
  switch (element_size) {
    case 1: return copy_words(uint8_t{});
    case 2: return copy_words(uint16_t{});
    case 4: return copy_words(uint32_t{});
    case 8: return copy_words(uint64_t{});
    default: break;
  }
  const auto* src_bytes = static_cast<const uint8_t*>(src);
  auto* dst_bytes = static_cast<uint8_t*>(dst);
  const auto size = static_cast<int64_t>(element_size);
  for_each_offset<2>(shape, {src_strides, dst_strides}, {src_base, dst_base},
                     [&](const std::array<int64_t, 2>& offsets) {
                       std::memcpy(dst_bytes + offsets[1] * size, src_bytes + offsets[0] * size, element_size);
                     });
}

void copy_strided(const Shape& shape, ScalarType src_type, const void* src, const int64_t* src_strides,
                  int64_t src_base, ScalarType dst_type, void* dst, const int64_t* dst_strides, int64_t dst_base) {
  if (src_type == dst_type) {
    copy_strided_bytes(shape, etna::element_size(static_cast<int>(src_type)).value_or(1), src, src_strides, src_base,
                       dst, dst_strides, dst_base);
    return;
  }
  visit_element_dtype(src_type, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    visit_element_dtype(dst_type, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      for_each_offset<2>(shape, {src_strides, dst_strides}, {src_base, dst_base},
                         [&](const std::array<int64_t, 2>& offsets) {
                           store_element<D>(dst, offsets[1], convert_value<D>(load_element<S>(src, offsets[0])));
                         });
    });
  });
}

void copy_broadcast(const Tensor& src, Tensor& dst) {
  const Shape shape = Shape::of(dst);
  if (src.dtype() == dst.dtype() && Shape::of(src) == shape && is_row_major(src) && is_row_major(dst)) {
    if (dst.nbytes() > 0 && dst.data() != src.data()) std::memmove(dst.data(), src.data(), dst.nbytes());
    return;
  }
  const Strides src_strides = broadcast_strides(src, shape);
  const Strides dst_strides = strides_of(dst);
  copy_strided(shape, src.dtype(), src.data(), src_strides.data(), 0, dst.dtype(), dst.data(), dst_strides.data(), 0);
}

std::vector<float> widen_elements(const Tensor& tensor) {
  std::vector<float> values(tensor.numel());
  const ReadFn<float> read = reader_for<float>(tensor.dtype());
  const void* data = tensor.data();
  for (size_t i = 0; i < values.size(); ++i) values[i] = read(data, static_cast<int64_t>(i));
  return values;
}

void narrow_elements(const std::vector<float>& values, Tensor& out) {
  const WriteFn<float> write = writer_for<float>(out.dtype());
  void* data = out.data();
  for (size_t i = 0; i < values.size(); ++i) write(data, static_cast<int64_t>(i), values[i]);
}

void fill_tensor(Tensor& out, const Scalar& value) {
  // Every dim order is dense, so the first numel elements are the tensor.
  const auto n = static_cast<int64_t>(out.numel());
  void* data = out.data();
  visit_element_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.to<T>();
    for (int64_t i = 0; i < n; ++i) store_element<T>(data, i, v);
  });
}

ReductionLayout make_reduction_layout(const Tensor& input, const std::array<bool, kMaxTensorRank>& reduce_dim,
                                      bool keepdim) {
  ReductionLayout layout;
  for (size_t d = 0; d < input.rank(); ++d) {
    if (reduce_dim[d]) {
      layout.reduced_strides[layout.reduced.rank] = input.stride(d);
      layout.reduced[layout.reduced.rank++] = input.size(d);
      layout.reduced_count *= input.size(d);
      if (keepdim) layout.out_shape[layout.out_shape.rank++] = 1;
    } else {
      layout.kept_strides[layout.kept.rank] = input.stride(d);
      layout.kept[layout.kept.rank++] = input.size(d);
      layout.out_shape[layout.out_shape.rank++] = input.size(d);
    }
  }
  return layout;
}

DimSplit split_at_dim(const Shape& shape, size_t dim) {
  DimSplit split;
  for (size_t d = 0; d < shape.rank; ++d) {
    if (d < dim) split.outer *= shape[d];
    else if (d == dim) split.size = shape[d];
    else split.inner *= shape[d];
  }
  return split;
}

}  // namespace etna::kernels
