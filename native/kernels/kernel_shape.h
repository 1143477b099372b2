// Shapes of the tensors kernels read and write, and their row-major layout.
#pragma once

#include <array>
#include <cstdint>

#include "core/shape.h"
#include "core/tensor.h"

namespace etna::kernels {

// A tensor shape held by value (rank <= kMaxTensorRank).
struct Shape : BasicShape<int64_t, kMaxTensorRank> {
  static Shape of(const Tensor& tensor) {
    Shape shape;
    shape.rank = tensor.rank();
    for (size_t i = 0; i < shape.rank; ++i) shape.dims[i] = tensor.size(i);
    return shape;
  }
};

// Strides of a row-major tensor of this shape (a size-0 dim counts as 1).
inline std::array<int64_t, kMaxTensorRank> row_major_strides(const Shape& shape) {
  std::array<int64_t, kMaxTensorRank> strides{};
  int64_t stride = 1;
  for (size_t d = shape.rank; d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d] == 0 ? 1 : shape[d];
  }
  return strides;
}

// True when the tensor's strides are those of a row-major tensor of its
// shape (dims of size 1 may have any stride), so flat indexing is valid.
inline bool is_row_major(const Tensor& tensor) {
  const auto expected = row_major_strides(Shape::of(tensor));
  for (size_t d = 0; d < tensor.rank(); ++d) {
    if (tensor.size(d) != 1 && tensor.stride(d) != expected[d]) return false;
  }
  return true;
}

}  // namespace etna::kernels
