// Normalizations along dims: softmax, log_softmax, layer norm and group norm.
// softmax, log_softmax and layer norm also take float16 and bfloat16, computed
// in float on widened copies and rounded once into the outputs.

#include <cmath>
#include <limits>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {
namespace {

// Runs f(TypeTag<T>{}, in, out) for float32/float64 tensors directly and for
// float16/bfloat16 ones on float copies (visit_stored_or_widened).
template <size_t N, size_t M, typename F>
void with_floating_operands(ScalarType type, const std::array<const Tensor*, N>& inputs,
                            const std::array<Tensor*, M>& outputs, F&& f) {
  visit_stored_or_widened(
      type, [](ScalarType t, auto&& g) { return visit_floating_dtype(t, g); }, inputs, outputs, std::forward<F>(f));
}

template <bool kLog>
Status softmax_family(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * self, op.input(0, "self"));
  ETNA_KERNEL_ASSIGN(int64_t dim, op.int_arg(1, "dim"));
  ETNA_KERNEL_ASSIGN(bool half_to_float, op.bool_arg(2, "half_to_float"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_TRY(op.expect_any_floating(*self, "self"));
  if (half_to_float && self->dtype() == ScalarType::kHalf) {
    return op.unsupported("half_to_float is not supported (ExecuTorch's portable kernel refuses it too)");
  }
  if (half_to_float) return op.program_error("half_to_float applies only to float16 input, got " + self->describe());
  ETNA_TRY(op.expect_dtype(*out, "out", self->dtype()));
  ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(dim, self->rank(), "dim"));
  const Shape shape = Shape::of(*self);
  ETNA_TRY(op.prepare_output(*out, shape));
  const DimSplit split = split_at_dim(shape, self->rank() == 0 ? 0 : d);
  with_floating_operands<1, 1>(self->dtype(), {self}, {out}, [&](auto tag, const auto& ins, const auto& outs) {
    using T = typename decltype(tag)::type;
    const T* in = ins[0];
    T* result = outs[0];
    for (int64_t o = 0; o < split.outer; ++o) {
      for (int64_t i = 0; i < split.inner; ++i) {
        const int64_t base = o * split.size * split.inner + i;
        const int64_t step = split.inner;
        // Subtracting the maximum keeps exp() from overflowing.
        T max_value = -std::numeric_limits<T>::infinity();
        for (int64_t k = 0; k < split.size; ++k) {
          const T v = in[base + k * step];
          if (std::isnan(v) || v > max_value) max_value = v;
          if (std::isnan(max_value)) break;
        }
        if (std::isinf(max_value) && max_value < 0) max_value = 0;  // all -inf: avoid inf - inf
        double sum = 0;
        for (int64_t k = 0; k < split.size; ++k) sum += std::exp(static_cast<double>(in[base + k * step] - max_value));
        if (kLog) {
          const T log_sum = static_cast<T>(std::log(sum));
          for (int64_t k = 0; k < split.size; ++k) {
            result[base + k * step] = in[base + k * step] - max_value - log_sum;
          }
        } else {
          for (int64_t k = 0; k < split.size; ++k) {
            result[base + k * step] =
                static_cast<T>(std::exp(static_cast<double>(in[base + k * step] - max_value)) / sum);
          }
        }
      }
    }
  });
  return Status::ok();
}

// A weight or bias of layer norm: None, or a tensor shaped like the
// normalized dims with input's dtype.
Status check_affine(const OpArgs& op, const Tensor* param, std::string_view name, const Tensor& input,
                    const Shape& normalized) {
  if (!param) return Status::ok();
  ETNA_TRY(op.expect_dtype(*param, name, input.dtype()));
  if (Shape::of(*param) != normalized) {
    return op.input_error(std::string(name) + " " + param->describe() + " must have the normalized shape " +
                          normalized.to_string());
  }
  return Status::ok();
}

Status native_layer_norm_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> normalized_sizes, op.int_list_arg(1, "normalized_shape"));
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.optional_input(2, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.optional_input(3, "bias"));
  ETNA_KERNEL_ASSIGN(double eps, op.double_arg(4, "eps"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(5, "out0"));
  ETNA_KERNEL_ASSIGN(Tensor * mean_out, op.output(6, "out1"));
  ETNA_KERNEL_ASSIGN(Tensor * rstd_out, op.output(7, "out2"));
  ETNA_TRY(op.expect_any_floating(*input, "input"));
  const size_t k = normalized_sizes.size();
  const Shape shape = Shape::of(*input);
  if (k == 0 || k > shape.rank) {
    return op.input_error("normalized_shape must name 1.." + std::to_string(shape.rank) + " trailing dims of input " +
                          input->describe() + ", got " + std::to_string(k));
  }
  Shape normalized;
  normalized.rank = k;
  for (size_t i = 0; i < k; ++i) {
    normalized[i] = normalized_sizes[i];
    if (shape[shape.rank - k + i] != normalized_sizes[i]) {
      return op.input_error("normalized_shape " + std::string(normalized.to_string()) +
                            " does not match the trailing dims of input " + input->describe());
    }
  }
  ETNA_TRY(check_affine(op, weight, "weight", *input, normalized));
  ETNA_TRY(check_affine(op, bias, "bias", *input, normalized));
  ETNA_TRY(op.expect_dtype(*out, "out0", input->dtype()));
  ETNA_TRY(op.expect_dtype(*mean_out, "out1", input->dtype()));
  ETNA_TRY(op.expect_dtype(*rstd_out, "out2", input->dtype()));
  Shape stats_shape = shape;
  for (size_t i = shape.rank - k; i < shape.rank; ++i) stats_shape[i] = 1;
  ETNA_TRY(op.prepare_output(*out, shape, "out0"));
  ETNA_TRY(op.prepare_output(*mean_out, stats_shape, "out1"));
  ETNA_TRY(op.prepare_output(*rstd_out, stats_shape, "out2"));
  const int64_t row_size = normalized.numel();
  const int64_t rows = stats_shape.numel();
  const std::array<const Tensor*, 3> operands = {input, weight, bias};
  const std::array<Tensor*, 3> results = {out, mean_out, rstd_out};
  with_floating_operands(input->dtype(), operands, results, [&](auto tag, const auto& ins, const auto& outs) {
    using T = typename decltype(tag)::type;
    const T* in = ins[0];
    const T* w = ins[1];
    const T* b = ins[2];
    T* result = outs[0];
    T* mean_data = outs[1];
    T* rstd_data = outs[2];
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = in + r * row_size;
      double mean = 0;
      for (int64_t j = 0; j < row_size; ++j) mean += x[j];
      mean = row_size > 0 ? mean / static_cast<double>(row_size) : 0.0;
      double variance = 0;
      for (int64_t j = 0; j < row_size; ++j) variance += (x[j] - mean) * (x[j] - mean);
      variance = row_size > 0 ? variance / static_cast<double>(row_size) : 0.0;
      const double rstd = 1.0 / std::sqrt(variance + eps);
      for (int64_t j = 0; j < row_size; ++j) {
        double y = (x[j] - mean) * rstd;
        if (w) y *= w[j];
        if (b) y += b[j];
        result[r * row_size + j] = static_cast<T>(y);
      }
      mean_data[r] = static_cast<T>(mean);
      rstd_data[r] = static_cast<T>(rstd);
    }
  });
  return Status::ok();
}

// Group norm over [N, C, *] viewed as N * group rows of (C / group) * HxW
// elements: mean and rstd per row (population variance), then the per-channel
// affine. Outs: result, mean [N, group], rstd [N, group]; an empty row gets
// mean 0 and rstd NaN (ExecuTorch).
Status native_group_norm_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.optional_input(1, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.optional_input(2, "bias"));
  ETNA_KERNEL_ASSIGN(int64_t n, op.int_arg(3, "N"));
  ETNA_KERNEL_ASSIGN(int64_t c, op.int_arg(4, "C"));
  ETNA_KERNEL_ASSIGN(int64_t hxw, op.int_arg(5, "HxW"));
  ETNA_KERNEL_ASSIGN(int64_t group, op.int_arg(6, "group"));
  ETNA_KERNEL_ASSIGN(double eps, op.double_arg(7, "eps"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(8, "out0"));
  ETNA_KERNEL_ASSIGN(Tensor * mean_out, op.output(9, "out1"));
  ETNA_KERNEL_ASSIGN(Tensor * rstd_out, op.output(10, "out2"));
  ETNA_TRY(op.expect_floating(*input, "input"));
  int64_t planes = 0, expected_numel = 0;
  const bool sizes_match = input->rank() >= 2 && input->size(0) == n && input->size(1) == c && hxw >= 0 &&
                           !__builtin_mul_overflow(n, c, &planes) &&
                           !__builtin_mul_overflow(planes, hxw, &expected_numel) &&
                           expected_numel == static_cast<int64_t>(input->numel());
  if (!sizes_match) {
    return op.input_error("input " + input->describe() + " does not have N = " + std::to_string(n) +
                          ", C = " + std::to_string(c) + " and HxW = " + std::to_string(hxw));
  }
  if (group <= 0 || c % group != 0) {
    return op.input_error("group " + std::to_string(group) + " must be positive and divide C = " + std::to_string(c));
  }
  Shape channels;
  channels.rank = 1;
  channels[0] = c;
  ETNA_TRY(check_affine(op, weight, "weight", *input, channels));
  ETNA_TRY(check_affine(op, bias, "bias", *input, channels));
  ETNA_TRY(op.expect_dtype(*out, "out0", input->dtype()));
  ETNA_TRY(op.expect_dtype(*mean_out, "out1", input->dtype()));
  ETNA_TRY(op.expect_dtype(*rstd_out, "out2", input->dtype()));
  Shape stats;
  stats.rank = 2;
  stats[0] = n;
  stats[1] = group;
  ETNA_TRY(op.prepare_output(*out, Shape::of(*input), "out0"));
  ETNA_TRY(op.prepare_output(*mean_out, stats, "out1"));
  ETNA_TRY(op.prepare_output(*rstd_out, stats, "out2"));
  const int64_t per_group = c / group;
  const int64_t row_size = per_group * hxw;
  visit_floating_dtype(input->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = input->data_as<T>();
    const T* w = weight ? weight->data_as<T>() : nullptr;
    const T* b = bias ? bias->data_as<T>() : nullptr;
    T* y = out->data_as<T>();
    for (int64_t row = 0; row < n * group; ++row) {
      if (row_size == 0) {
        mean_out->data_as<T>()[row] = T(0);
        rstd_out->data_as<T>()[row] = std::numeric_limits<T>::quiet_NaN();
        continue;
      }
      const T* xr = x + row * row_size;
      double mean = 0;
      for (int64_t j = 0; j < row_size; ++j) mean += xr[j];
      mean /= static_cast<double>(row_size);
      double variance = 0;
      for (int64_t j = 0; j < row_size; ++j) variance += (xr[j] - mean) * (xr[j] - mean);
      variance /= static_cast<double>(row_size);
      const double rstd = 1.0 / std::sqrt(variance + eps);
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t channel = (row % group) * per_group + k;
        const double scale = rstd * (w ? static_cast<double>(w[channel]) : 1.0);
        const double shift = (b ? static_cast<double>(b[channel]) : 0.0) - scale * mean;
        const int64_t base = (row * per_group + k) * hxw;
        for (int64_t i = 0; i < hxw; ++i) y[base + i] = static_cast<T>(scale * x[base + i] + shift);
      }
      mean_out->data_as<T>()[row] = static_cast<T>(mean);
      rstd_out->data_as<T>()[row] = static_cast<T>(rstd);
    }
  });
  return Status::ok();
}

}  // namespace

void register_normalization_kernels(KernelRegistry& registry) {
  registry.add({"aten::_softmax.out", 5, softmax_family<false>});
  registry.add({"aten::_log_softmax.out", 5, softmax_family<true>});
  registry.add({"aten::native_layer_norm.out", 9, native_layer_norm_out});
  registry.add({"aten::native_group_norm.out", 12, native_group_norm_out});
}

}  // namespace etna::kernels
