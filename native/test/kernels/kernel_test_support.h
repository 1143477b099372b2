// Helpers for kernel tests: tensors over test-owned buffers, argument lists
// built like the executor builds them, and calls through the registry.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/evalue.h"
#include "core/kernel.h"
#include "core/tensor.h"
#include "kernels/element_access.h"

namespace etna::kernel_test {

struct TensorOptions {
  ShapeDynamism dynamism = ShapeDynamism::kStatic;
  // Elements of memory behind the tensor; 0 = exactly its element count.
  size_t capacity_elements = 0;
  // Memory order of dims; empty = row-major.
  std::vector<uint8_t> dim_order;
};

// Options for an out whose shape may shrink below its planned size.
inline TensorOptions bounded() {
  TensorOptions options;
  options.dynamism = ShapeDynamism::kBound;
  return options;
}

// Owns tensors and their bytes for one test.
class TensorStore {
 public:
  // A tensor of `sizes` holding `values` in memory order.
  template <typename T>
  Tensor& make(std::vector<int64_t> sizes, const std::vector<T>& values, const TensorOptions& options = {}) {
    Tensor& t = make_empty(kernels::dtype_of<T>(), std::move(sizes), options);
    EXPECT_EQ(values.size(), t.numel()) << "test tensor values do not match its shape";
    for (size_t i = 0; i < values.size() && i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        static_cast<uint8_t*>(t.data())[i] = values[i] ? 1 : 0;
      } else {
        static_cast<T*>(t.data())[i] = values[i];
      }
    }
    return t;
  }

  // A tensor whose bytes are zero; `sizes` is also the planned (upper-bound) shape.
  Tensor& make_empty(ScalarType dtype, std::vector<int64_t> sizes, const TensorOptions& options = {}) {
    auto owned = std::make_unique<Owned>();
    owned->tensor.init(dtype, sizes.size(), sizes.data(),
                       options.dim_order.empty() ? nullptr : options.dim_order.data(), options.dynamism);
    const size_t elements = options.capacity_elements ? options.capacity_elements : owned->tensor.numel();
    const size_t bytes = elements * owned->tensor.element_size();
    owned->words.assign((bytes + 7) / 8 + 1, 0);  // 8-byte aligned, never empty
    owned->tensor.set_data(owned->words.data(), bytes);
    owned_.push_back(std::move(owned));
    return owned_.back()->tensor;
  }

 private:
  struct Owned {
    std::vector<uint64_t> words;
    Tensor tensor;
  };
  std::vector<std::unique_ptr<Owned>> owned_;
};

// The first numel elements of a tensor in memory order.
template <typename T>
std::vector<T> values_of(const Tensor& t) {
  std::vector<T> out(t.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = static_cast<const uint8_t*>(t.data())[i] != 0;
    } else {
      out[i] = static_cast<const T*>(t.data())[i];
    }
  }
  return out;
}

// n consecutive values from `start`, as test data whose positions show.
inline std::vector<float> iota_floats(size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

inline std::vector<int64_t> shape_of(const Tensor& t) { return std::vector<int64_t>(t.sizes(), t.sizes() + t.rank()); }

// An argument list for one kernel call. Slots keep stable addresses.
class Args {
 public:
  Args() = default;
  // Slots point into this object, so it must not be copied.
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;

  Args& tensor(Tensor& t) { return push(EValue::from_tensor(&t)); }
  Args& none() { return push(EValue::none()); }
  // nullptr is None.
  Args& optional_tensor(Tensor* t) { return t ? tensor(*t) : none(); }
  Args& integer(int64_t v) { return push(EValue::from_int(v)); }
  Args& real(double v) { return push(EValue::from_double(v)); }
  Args& boolean(bool v) { return push(EValue::from_bool(v)); }
  // A dtype argument: the schema's ScalarType int.
  Args& dtype(ScalarType v) { return integer(static_cast<int64_t>(v)); }
  Args& string(std::string v) {
    strings_.push_back(std::move(v));
    return push(EValue::from_string(strings_.back()));
  }
  Args& ints(const std::vector<int64_t>& items) {
    std::vector<EValue*>& pointers = new_list();
    for (int64_t v : items) {
      hidden_.push_back(EValue::from_int(v));
      pointers.push_back(&hidden_.back());
    }
    return push(EValue::from_int_list(pointers.data(), pointers.size()));
  }
  Args& doubles(const std::vector<double>& items) {
    double_lists_.push_back(items);
    return push(EValue::from_double_list(double_lists_.back().data(), double_lists_.back().size()));
  }
  Args& tensors(const std::vector<Tensor*>& items) { return tensor_list(items, false); }
  // Out tensors, then the return slot that lists them (kernels with several outs).
  Args& outs(const std::vector<Tensor*>& items) {
    for (Tensor* t : items) tensor(*t);
    return tensors(items);
  }
  // nullptr items are None.
  Args& optional_tensors(const std::vector<Tensor*>& items) { return tensor_list(items, true); }
  // A slot that is the same value as slot `index` (how a return slot repeats out).
  Args& same_as(size_t index) {
    slots_.push_back(slots_.at(index));
    return *this;
  }

  size_t size() const { return slots_.size(); }
  EValue& operator[](size_t i) { return *slots_.at(i); }
  KernelArgs view(const KernelDescriptor& kernel, pthreadpool_t pool = nullptr) const {
    return KernelArgs{slots_.data(), slots_.size(), &kernel, pool};
  }

 private:
  Args& push(EValue v) {
    values_.push_back(v);
    slots_.push_back(&values_.back());
    return *this;
  }
  std::vector<EValue*>& new_list() {
    lists_.emplace_back();
    return lists_.back();
  }
  Args& tensor_list(const std::vector<Tensor*>& items, bool optional) {
    std::vector<EValue*>& pointers = new_list();
    for (Tensor* t : items) {
      if (t) {
        hidden_.push_back(EValue::from_tensor(t));
        pointers.push_back(&hidden_.back());
      } else {
        hidden_.push_back(EValue::none());
        pointers.push_back(&hidden_.back());
      }
    }
    return push(EValue::from_tensor_list(pointers.data(), pointers.size(), optional));
  }

  std::deque<EValue> values_;
  std::deque<EValue> hidden_;
  std::deque<std::vector<EValue*>> lists_;
  std::deque<std::string> strings_;
  std::deque<std::vector<double>> double_lists_;
  std::vector<EValue*> slots_;
};

// Calls the registered kernel for `key` as the executor would, including its
// arity check, with `pool` as the call's thread pool (null: none).
inline Status run_kernel(std::string_view key, const Args& args, pthreadpool_t pool = nullptr) {
  const KernelDescriptor* kernel = kernel_registry().find(key);
  if (!kernel) return make_error(ErrorCode::kUnsupportedOperator, std::string(key) + " is not registered");
  ETNA_TRY(check_arity(*kernel, args.size()));
  return kernel->fn(args.view(*kernel, pool));
}

// Calls the kernel function directly, skipping the arity check (to test the
// kernel's own checks).
inline Status call_kernel_fn(std::string_view key, const Args& args) {
  const KernelDescriptor* kernel = kernel_registry().find(key);
  if (!kernel) return make_error(ErrorCode::kUnsupportedOperator, std::string(key) + " is not registered");
  return kernel->fn(args.view(*kernel));
}

// Calls a kernel whose arguments are [self, out] and a return slot that is out.
inline Status run_unary(std::string_view key, Tensor& self, Tensor& out) {
  Args args;
  args.tensor(self).tensor(out).same_as(1);
  return run_kernel(key, args);
}

// ... [self, other, out] and a return slot that is out.
inline Status run_binary(std::string_view key, Tensor& self, Tensor& other, Tensor& out) {
  Args args;
  args.tensor(self).tensor(other).tensor(out).same_as(2);
  return run_kernel(key, args);
}

// ... [self, dims, keepdim, out] (amax, amin, any.dims) and a return slot that is out.
inline Status run_reduction(std::string_view key, Tensor& self, const std::vector<int64_t>& dims, bool keepdim,
                            Tensor& out) {
  Args args;
  args.tensor(self).ints(dims).boolean(keepdim).tensor(out).same_as(3);
  return run_kernel(key, args);
}

// ... [self, other, scalar, out] (alpha of add and sub, masked_fill's value):
// an integer scalar passes as Int, a floating one as Double.
template <typename S>
Status run_binary(std::string_view key, Tensor& self, Tensor& other, S scalar, Tensor& out) {
  Args args;
  args.tensor(self).tensor(other);
  if constexpr (std::is_integral_v<S>) {
    args.integer(scalar);
  } else {
    args.real(scalar);
  }
  args.tensor(out).same_as(3);
  return run_kernel(key, args);
}

inline ::testing::AssertionResult is_ok(const Status& status) {
  if (status.is_ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.error().message;
}

// The status failed and its message contains every fragment.
inline ::testing::AssertionResult fails_with(const Status& status, std::initializer_list<std::string_view> fragments) {
  if (status.is_ok()) return ::testing::AssertionFailure() << "expected an error, got ok";
  const std::string& message = status.error().message;
  for (std::string_view fragment : fragments) {
    if (message.find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << fragment << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// A small deterministic generator so test data is reproducible.
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return state_ >> 33;
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() % 1000000) / 1000000.0f; }
  int64_t integer(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo)); }
  std::vector<float> floats(size_t n, float lo = -2.0f, float hi = 2.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }

 private:
  uint64_t state_;
};

// Normalization statistics of one row, in double: the mean and
// 1 / sqrt(biased variance + eps), as a reference for layer and group norm.
struct RowStatistics {
  double mean;
  double rstd;
};

template <typename T>
RowStatistics row_statistics(const std::vector<T>& x, size_t row, size_t width, double eps) {
  double mean = 0, variance = 0;
  for (size_t j = 0; j < width; ++j) mean += x[row * width + j];
  mean /= static_cast<double>(width);
  for (size_t j = 0; j < width; ++j) variance += (x[row * width + j] - mean) * (x[row * width + j] - mean);
  variance /= static_cast<double>(width);
  return {mean, 1 / std::sqrt(variance + eps)};
}

}  // namespace etna::kernel_test
