#include "tensor.h"

namespace etna {

std::string shape_text(const int64_t* sizes, size_t rank) {
  std::string text = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) text += ", ";
    text += std::to_string(sizes[i]);
  }
  return text + "]";
}

std::string tensor_text(ScalarType dtype, const int64_t* sizes, size_t rank) {
  return std::string(dtype_name(dtype)) + shape_text(sizes, rank);
}

bool Tensor::is_contiguous() const {
  for (size_t i = 0; i < rank_; ++i) {
    if (dim_order_[i] != i) return false;
  }
  return true;
}

size_t Tensor::numel() const {
  size_t n = 1;
  for (size_t i = 0; i < rank_; ++i) n *= static_cast<size_t>(sizes_[i]);
  return n;
}

size_t Tensor::element_size() const { return etna::element_size(static_cast<int>(dtype_)).value_or(1); }

void Tensor::init(ScalarType dtype, size_t rank, const int64_t* sizes, const uint8_t* dim_order,
                  ShapeDynamism dynamism) {
  dtype_ = dtype;
  rank_ = rank;
  dynamism_ = dynamism;
  for (size_t i = 0; i < rank; ++i) {
    sizes_[i] = sizes[i];
    dim_order_[i] = dim_order ? dim_order[i] : static_cast<uint8_t>(i);
  }
  compute_strides();
}

void Tensor::compute_strides() {
  // The innermost dim in dim_order has stride 1; a zero-sized dim counts as 1.
  int64_t stride = 1;
  for (size_t k = rank_; k-- > 0;) {
    const uint8_t dim = dim_order_[k];
    strides_[dim] = stride;
    stride *= sizes_[dim] == 0 ? 1 : sizes_[dim];
  }
}

Status Tensor::resize(size_t rank, const int64_t* sizes) {
  if (rank != rank_) {
    return make_error(ErrorCode::kInternal, "cannot resize " + describe() + " to rank " + std::to_string(rank));
  }
  bool same = true;
  uint64_t elements = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (sizes[i] < 0) return make_error(ErrorCode::kInternal, "negative size in resize of " + describe());
    same = same && sizes[i] == sizes_[i];
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(sizes[i]), &elements)) {
      return make_error(ErrorCode::kInternal, "resize of " + describe() + " overflows");
    }
  }
  if (same) return Status::ok();
  if (dynamism_ == ShapeDynamism::kStatic) {
    return make_error(ErrorCode::kInternal,
                      "static tensor " + describe() + " cannot take shape " + shape_text(sizes, rank));
  }
  if (elements * element_size() > capacity_ && data_ != nullptr) {
    return make_error(ErrorCode::kInternal,
                      "resize of " + describe() + " exceeds its " + std::to_string(capacity_) + " planned bytes");
  }
  for (size_t i = 0; i < rank; ++i) sizes_[i] = sizes[i];
  compute_strides();
  return Status::ok();
}

std::string Tensor::describe() const { return tensor_text(dtype_, sizes_.data(), rank_); }

}  // namespace etna
