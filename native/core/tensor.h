// A runtime tensor: dtype, shape, contiguous strides derived from the dim
// order, and a data pointer into an arena, the program's constants or a
// caller's buffer. It never owns its bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dtype.h"
#include "status.h"

namespace etna {

constexpr size_t kMaxTensorRank = 16;

enum class ShapeDynamism : uint8_t { kStatic = 0, kBound = 1, kUnbound = 2 };

// "[2, 3]" and "float32[2, 3]", as every message shows shapes.
std::string shape_text(const int64_t* sizes, size_t rank);
std::string tensor_text(ScalarType dtype, const int64_t* sizes, size_t rank);

class Tensor {
 public:
  Tensor() = default;

  ScalarType dtype() const { return dtype_; }
  size_t rank() const { return rank_; }
  int64_t size(size_t dim) const { return sizes_[dim]; }
  const int64_t* sizes() const { return sizes_.data(); }
  int64_t stride(size_t dim) const { return strides_[dim]; }
  const int64_t* strides() const { return strides_.data(); }
  const uint8_t* dim_order() const { return dim_order_.data(); }
  ShapeDynamism dynamism() const { return dynamism_; }
  // True when dim_order is 0, 1, ..., rank-1 (row-major).
  bool is_contiguous() const;

  size_t numel() const;
  size_t element_size() const;
  size_t nbytes() const { return numel() * element_size(); }
  // Bytes reserved behind data(): the planned (upper-bound) size, or the
  // caller buffer's size.
  size_t capacity() const { return capacity_; }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  // Sets everything but the data; strides follow dim_order. Used when a
  // method is loaded.
  void init(ScalarType dtype, size_t rank, const int64_t* sizes, const uint8_t* dim_order, ShapeDynamism dynamism);
  void set_data(void* data, size_t capacity) {
    data_ = data;
    capacity_ = capacity;
  }

  // Changes the shape within the tensor's rules: a static tensor only to its
  // own shape; a bounded one to any shape of the same rank that fits its
  // capacity. Kernels call this on their outputs.
  Status resize(size_t rank, const int64_t* sizes);

  // "float32[2, 3]"
  std::string describe() const;

 private:
  void compute_strides();

  ScalarType dtype_ = ScalarType::kFloat;
  size_t rank_ = 0;
  std::array<int64_t, kMaxTensorRank> sizes_{};
  std::array<int64_t, kMaxTensorRank> strides_{};
  std::array<uint8_t, kMaxTensorRank> dim_order_{};
  ShapeDynamism dynamism_ = ShapeDynamism::kStatic;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace etna
