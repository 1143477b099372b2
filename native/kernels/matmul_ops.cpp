// Matrix products: mm, bmm, addmm and linear. Operands share one dtype (as
// in PyTorch); loops run i-k-j so the inner loop streams contiguous rows.
// float16 and bfloat16 operands are multiplied as float (products accumulate
// in float) and each result is rounded once.

#include <algorithm>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

// c[n, p] = a[n, m] @ b[m, p], all row-major.
template <typename T>
void matmul(const T* a, const T* b, T* c, int64_t n, int64_t m, int64_t p) {
  for (int64_t i = 0; i < n; ++i) {
    T* c_row = c + i * p;
    std::fill(c_row, c_row + p, T(0));
    for (int64_t k = 0; k < m; ++k) {
      const T a_ik = a[i * m + k];
      const T* b_row = b + k * p;
      if constexpr (std::is_floating_point_v<T>) {
        for (int64_t j = 0; j < p; ++j) c_row[j] += a_ik * b_row[j];
      } else {
        for (int64_t j = 0; j < p; ++j) c_row[j] = wrapping_add(c_row[j], wrapping_mul(a_ik, b_row[j]));
      }
    }
  }
}

// sum_k a[k] * b[k] over two contiguous rows.
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    // Independent partial sums break the serial dependency so the loop vectorizes.
    constexpr int kLanes = 8;
    T partial[kLanes] = {};
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int u = 0; u < kLanes; ++u) partial[u] += a[k + u] * b[k + u];
    }
    T total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
              ((partial[4] + partial[5]) + (partial[6] + partial[7]));
    for (; k < n; ++k) total += a[k] * b[k];
    return total;
  } else {
    T total = 0;
    for (int64_t k = 0; k < n; ++k) total = wrapping_add(total, wrapping_mul(a[k], b[k]));
    return total;
  }
}

// Calls f(TypeTag<T>{}, in, result) with the inputs' data as const T* (null
// inputs give nullptr) and out's data as T*; see visit_stored_or_widened.
// Matrix products take every numeric dtype but bool.
template <size_t N, typename F>
void with_matmul_operands(const std::array<const Tensor*, N>& inputs, Tensor& out, F&& f) {
  visit_stored_or_widened(
      out.dtype(), [](ScalarType type, auto&& g) { return visit_numeric_dtype(type, g); }, inputs,
      std::array<Tensor*, 1>{&out}, [&](auto tag, const auto& in, const auto& results) { f(tag, in, results[0]); });
}

Status check_matmul_dtypes(const OpArgs& op, std::initializer_list<std::pair<const Tensor*, std::string_view>> tensors,
                           const Tensor& out) {
  const ScalarType dtype = out.dtype();
  if (dtype == ScalarType::kBool || !is_element_dtype(dtype)) {
    return op.unsupported("out has dtype " + std::string(dtype_name(dtype)) +
                          "; supported: uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64");
  }
  for (const auto& [tensor, name] : tensors) {
    if (tensor && tensor->dtype() != dtype) {
      return op.program_error(std::string(name) + " " + tensor->describe() + " and out " + out.describe() +
                              " must have the same dtype");
    }
  }
  return Status::ok();
}

Status check_inner_dims(const OpArgs& op, const Tensor& a, std::string_view a_name, const Tensor& b,
                        std::string_view b_name, int64_t a_inner, int64_t b_inner) {
  if (a_inner == b_inner) return Status::ok();
  return op.input_error("cannot multiply " + std::string(a_name) + " " + a.describe() + " by " + std::string(b_name) +
                        " " + b.describe() + ": inner sizes " + std::to_string(a_inner) + " and " +
                        std::to_string(b_inner) + " differ");
}

// mm (kRank 2) and bmm (kRank 3: a batch of products, the batch dim first).
template <size_t kRank>
Status matrix_product_out(KernelArgs args) {
  static_assert(kRank == 2 || kRank == 3, "mm or bmm");
  constexpr size_t kRow = kRank - 2;  // the first matrix dim
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * mat2, op.input(1, "mat2"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_TRY(check_matmul_dtypes(op, {{self, "self"}, {mat2, "mat2"}}, *out));
  ETNA_TRY(op.expect_rank(*self, "self", kRank));
  ETNA_TRY(op.expect_rank(*mat2, "mat2", kRank));
  if (kRank == 3 && self->size(0) != mat2->size(0)) {
    return op.input_error("batch sizes of self " + self->describe() + " and mat2 " + mat2->describe() + " differ");
  }
  ETNA_TRY(check_inner_dims(op, *self, "self", *mat2, "mat2", self->size(kRow + 1), mat2->size(kRow)));
  Shape shape;
  shape.rank = kRank;
  if (kRank == 3) shape[0] = self->size(0);
  shape[kRow] = self->size(kRow);
  shape[kRow + 1] = mat2->size(kRow + 1);
  ETNA_TRY(op.prepare_output(*out, shape));
  const int64_t batches = kRank == 3 ? shape[0] : 1;
  const int64_t n = shape[kRow], m = self->size(kRow + 1), p = shape[kRow + 1];
  with_matmul_operands<2>({self, mat2}, *out, [&](auto, const auto& in, auto* result) {
    for (int64_t batch = 0; batch < batches; ++batch) {
      matmul(in[0] + batch * n * m, in[1] + batch * m * p, result + batch * n * p, n, m, p);
    }
  });
  return Status::ok();
}

Status check_integral_scale(const OpArgs& op, const Scalar& scale, std::string_view name, ScalarType dtype) {
  if (!scale.is_double() || is_floating_dtype(dtype)) return Status::ok();
  return op.program_error(std::string(name) + " " + scale.describe() + " must be an integer for " +
                          std::string(dtype_name(dtype)) + " operands");
}

Status addmm_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Tensor * mat1, op.input(1, "mat1"));
  ETNA_KERNEL_ASSIGN(Tensor * mat2, op.input(2, "mat2"));
  ETNA_KERNEL_ASSIGN(Scalar beta, op.scalar_arg(3, "beta"));
  ETNA_KERNEL_ASSIGN(Scalar alpha, op.scalar_arg(4, "alpha"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(5, "out"));
  ETNA_TRY(check_matmul_dtypes(op, {{bias, "self"}, {mat1, "mat1"}, {mat2, "mat2"}}, *out));
  ETNA_TRY(op.expect_rank(*mat1, "mat1", 2));
  ETNA_TRY(op.expect_rank(*mat2, "mat2", 2));
  ETNA_TRY(check_inner_dims(op, *mat1, "mat1", *mat2, "mat2", mat1->size(1), mat2->size(0)));
  ETNA_TRY(check_integral_scale(op, beta, "beta", out->dtype()));
  ETNA_TRY(check_integral_scale(op, alpha, "alpha", out->dtype()));
  Shape shape;
  shape.rank = 2;
  shape[0] = mat1->size(0);
  shape[1] = mat2->size(1);
  ETNA_KERNEL_ASSIGN(Shape broadcast, op.broadcast_shapes(Shape::of(*bias), "self", shape, "mat1 @ mat2"));
  if (broadcast != shape) {
    return op.input_error("self " + bias->describe() + " does not broadcast to the product shape " + shape.to_string());
  }
  ETNA_TRY(op.prepare_output(*out, shape));
  if (out->data() == bias->data() && out->numel() > 0) {
    return op.program_error("out must not share memory with self");
  }
  const Strides bias_strides = broadcast_strides(*bias, shape);
  with_matmul_operands<3>({mat1, mat2, bias}, *out, [&](auto tag, const auto& in, auto* result) {
    using T = typename decltype(tag)::type;
    matmul(in[0], in[1], result, shape[0], mat1->size(1), shape[1]);
    const T alpha_value = alpha.to<T>();
    const T beta_value = beta.to<T>();
    const T* bias_data = in[2];
    // beta == 0 ignores self entirely (NaN and inf included), as in PyTorch.
    const bool use_bias = beta_value != T(0);
    for (int64_t i = 0; i < shape[0]; ++i) {
      for (int64_t j = 0; j < shape[1]; ++j) {
        T& value = result[i * shape[1] + j];
        value = wrapping_mul(alpha_value, value);
        if (use_bias) {
          value = wrapping_add(value, wrapping_mul(beta_value, bias_data[i * bias_strides[0] + j * bias_strides[1]]));
        }
      }
    }
  });
  return Status::ok();
}

Status linear_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.input(1, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.optional_input(2, "bias"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(check_matmul_dtypes(op, {{input, "input"}, {weight, "weight"}, {bias, "bias"}}, *out));
  if (input->rank() == 0) return op.input_error("input must have rank >= 1, got " + input->describe());
  ETNA_TRY(op.expect_rank(*weight, "weight", 2));
  const int64_t in_features = input->size(input->rank() - 1);
  const int64_t out_features = weight->size(0);
  ETNA_TRY(check_inner_dims(op, *input, "input", *weight, "weight", in_features, weight->size(1)));
  if (bias && !(bias->rank() <= 1 && (bias->numel() == static_cast<size_t>(out_features) || bias->numel() == 1))) {
    return op.input_error("bias " + bias->describe() + " must have " + std::to_string(out_features) +
                          " elements (or 1)");
  }
  Shape shape = Shape::of(*input);
  shape[shape.rank - 1] = out_features;
  ETNA_TRY(op.prepare_output(*out, shape));
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.rank; ++d) rows *= shape[d];
  const bool scalar_bias = bias && bias->numel() == 1;
  with_matmul_operands<3>({input, weight, bias}, *out, [&](auto tag, const auto& in, auto* y) {
    using T = typename decltype(tag)::type;
    const T* x = in[0];
    const T* w = in[1];
    const T* b = in[2];
    for (int64_t r = 0; r < rows; ++r) {
      const T* x_row = x + r * in_features;
      for (int64_t j = 0; j < out_features; ++j) {
        // Rows of x and of weight are both contiguous: a streaming dot product.
        T acc = dot(x_row, w + j * in_features, in_features);
        if (b) acc = wrapping_add(acc, b[scalar_bias ? 0 : j]);
        y[r * out_features + j] = acc;
      }
    }
  });
  return Status::ok();
}

}  // namespace

void register_matmul_kernels(KernelRegistry& registry) {
  registry.add({"aten::mm.out", 4, matrix_product_out<2>});
  registry.add({"aten::bmm.out", 4, matrix_product_out<3>});
  registry.add({"aten::addmm.out", 7, addmm_out});
  registry.add({"aten::linear.out", 5, linear_out});
}

}  // namespace etna::kernels
