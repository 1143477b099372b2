// Operators over the spatial dims of [N, C, H, W] images (or [C, H, W] where
// ExecuTorch allows it): max and average pooling windows, adaptive average
// pooling, nearest and bilinear upsampling, and batch norm with running
// statistics. Window sizes, padding limits, ceil_mode, index conventions and
// source-coordinate rounding follow ExecuTorch's portable kernels.

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dtype_promotion.h"
#include "kernels/element_access.h"
#include "kernels/iteration.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {
namespace {

// Keeps window arithmetic far from int64 overflow.
constexpr int64_t kParamLimit = int64_t(1) << 31;

// An image tensor seen as [batch, channels, height, width] with the element
// stride of each of those dims (a [C, H, W] tensor has batch 1).
struct Image {
  int64_t batch = 1, channels = 1, height = 1, width = 1;
  int64_t batch_stride = 0, channel_stride = 0, row_stride = 0, column_stride = 0;

  int64_t offset(int64_t n, int64_t c, int64_t y, int64_t x) const {
    return n * batch_stride + c * channel_stride + y * row_stride + x * column_stride;
  }
};

Image image_of(const Tensor& t) {
  Image image;
  const size_t r = t.rank();
  if (r == 4) {
    image.batch = t.size(0);
    image.batch_stride = t.stride(0);
  }
  image.channels = t.size(r - 3);
  image.channel_stride = t.stride(r - 3);
  image.height = t.size(r - 2);
  image.row_stride = t.stride(r - 2);
  image.width = t.size(r - 1);
  image.column_stride = t.stride(r - 1);
  return image;
}

// ExecuTorch's pooling input rule: [C, H, W] or [N, C, H, W], where only the
// batch may be empty.
Status expect_pooling_input(const OpArgs& op, const Tensor& in) {
  const size_t r = in.rank();
  const bool ok = (r == 3 || r == 4) && in.size(r - 3) > 0 && in.size(r - 2) > 0 && in.size(r - 1) > 0;
  if (!ok) {
    return op.input_error("input " + in.describe() +
                          " must be [C, H, W] or [N, C, H, W] with non-empty C, H and W (N may be 0)");
  }
  return Status::ok();
}

// The input's shape with its last two dims replaced.
Shape with_spatial(const Tensor& in, int64_t height, int64_t width) {
  Shape shape = Shape::of(in);
  shape[shape.rank - 2] = height;
  shape[shape.rank - 1] = width;
  return shape;
}

// A per-spatial-dim pair such as kernel_size or padding: one value applies to
// both dims; with `empty_default`, an empty list means that pair.
Result<std::array<int64_t, 2>> pair_arg(const OpArgs& op, size_t index, std::string_view name, int64_t minimum,
                                        const std::array<int64_t, 2>* empty_default = nullptr) {
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> values, op.int_list_arg(index, name));
  if (values.empty() && empty_default) return *empty_default;
  if (values.size() != 1 && values.size() != 2) {
    return op.input_error(OpArgs::arg_label(index, name) + " must have " + (empty_default ? "0, " : "") +
                          "1 or 2 entries, got " + std::to_string(values.size()));
  }
  const std::array<int64_t, 2> pair = {values[0], values.back()};
  for (int64_t v : pair) {
    if (v < minimum || v >= kParamLimit) {
      return op.input_error(OpArgs::arg_label(index, name) + " entries must be in [" + std::to_string(minimum) +
                            ", 2^31), got " + std::to_string(v));
    }
  }
  return pair;
}

// A pooling window: kernel, stride, padding and dilation per spatial dim.
struct Window {
  std::array<int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
};

// Reads kernel_size, stride (empty = kernel_size) and padding (at most half
// the kernel, ExecuTorch's rule) from consecutive slots starting at `first`.
Result<Window> read_window(const OpArgs& op, size_t first) {
  Window w;
  ETNA_KERNEL_ASSIGN(w.kernel, pair_arg(op, first, "kernel_size", 1));
  ETNA_KERNEL_ASSIGN(w.stride, pair_arg(op, first + 1, "stride", 1, &w.kernel));
  ETNA_KERNEL_ASSIGN(w.padding, pair_arg(op, first + 2, "padding", 0));
  for (size_t i = 0; i < 2; ++i) {
    if (w.padding[i] > w.kernel[i] / 2) {
      return op.input_error("padding " + std::to_string(w.padding[i]) + " must be at most half of kernel_size " +
                            std::to_string(w.kernel[i]));
    }
  }
  return w;
}

// Output length of one spatial dim. With ceil_mode the last window may hang
// over the end, but must start inside the input or its left padding. A
// window larger than the padded input is an error (-1).
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return -1;
  int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Result<Shape> pooled_shape(const OpArgs& op, const Tensor& in, const Window& w, bool ceil_mode) {
  const Image image = image_of(in);
  const int64_t out_h = pooled_size(image.height, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0], ceil_mode);
  const int64_t out_w = pooled_size(image.width, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1], ceil_mode);
  if (out_h <= 0 || out_w <= 0) {
    return op.input_error("the pooling window (kernel_size [" + std::to_string(w.kernel[0]) + ", " +
                          std::to_string(w.kernel[1]) + "], dilation [" + std::to_string(w.dilation[0]) + ", " +
                          std::to_string(w.dilation[1]) + "]) is larger than the padded input " + in.describe());
  }
  return with_spatial(in, out_h, out_w);
}

// Calls visit(n, c, y, x) for every element of an image, in row-major order.
template <typename Visit>
void for_each_pixel(const Image& image, Visit&& visit) {
  for (int64_t n = 0; n < image.batch; ++n) {
    for (int64_t c = 0; c < image.channels; ++c) {
      for (int64_t y = 0; y < image.height; ++y) {
        for (int64_t x = 0; x < image.width; ++x) visit(n, c, y, x);
      }
    }
  }
}

// A supported dtype other than bool, shared by `out`.
Status expect_same_numeric_dtype(const OpArgs& op, const Tensor& in, std::string_view name, const Tensor& out) {
  if (in.dtype() == ScalarType::kBool) {
    return op.program_error(std::string(name) + " must not be bool, got " + in.describe());
  }
  ETNA_TRY(op.expect_supported_dtype(in, name));
  return op.expect_dtype(out, "out", in.dtype());
}

// --- max_pool2d_with_indices -------------------------------------------------------

Status max_pool2d_with_indices_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Window w, read_window(op, 1));
  ETNA_KERNEL_ASSIGN(w.dilation, pair_arg(op, 4, "dilation", 1));
  ETNA_KERNEL_ASSIGN(bool ceil_mode, op.bool_arg(5, "ceil_mode"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(6, "out"));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.output(7, "indices"));
  ETNA_TRY(expect_same_numeric_dtype(op, *in, "self", *out));
  ETNA_TRY(op.expect_dtype(*indices, "indices", ScalarType::kLong));
  ETNA_TRY(expect_pooling_input(op, *in));
  ETNA_KERNEL_ASSIGN(Shape shape, pooled_shape(op, *in, w, ceil_mode));
  ETNA_TRY(op.prepare_output(*out, shape, "out", false));
  ETNA_TRY(op.prepare_output(*indices, shape, "indices", false));
  const Image src = image_of(*in);
  const Image dst = image_of(*out);
  const Image index_dst = image_of(*indices);
  auto* index_data = indices->data_as<int64_t>();
  visit_real_dtype(in->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const void* in_data = in->data();
    void* out_data = out->data();
    for_each_pixel(dst, [&](int64_t n, int64_t c, int64_t oy, int64_t ox) {
      // The first in-bounds element starts the window; a later one replaces
      // it only when strictly greater, so ties keep the first index (in
      // row-major window order). Indices count within the H x W plane.
      bool found = false;
      T best{};
      int64_t best_index = 0;
      for (int64_t ky = 0; ky < w.kernel[0]; ++ky) {
        const int64_t iy = oy * w.stride[0] - w.padding[0] + ky * w.dilation[0];
        if (iy < 0 || iy >= src.height) continue;
        for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
          const int64_t ix = ox * w.stride[1] - w.padding[1] + kx * w.dilation[1];
          if (ix < 0 || ix >= src.width) continue;
          const T v = load_element<T>(in_data, src.offset(n, c, iy, ix));
          if (!found || v > best) {
            best = v;
            best_index = iy * src.width + ix;
            found = true;
          }
        }
      }
      store_element<T>(out_data, dst.offset(n, c, oy, ox), best);
      index_data[index_dst.offset(n, c, oy, ox)] = best_index;
    });
  });
  return Status::ok();
}

// --- avg_pool2d, _adaptive_avg_pool2d ---------------------------------------------------

// float32, float64 or int64 (ExecuTorch's average dtypes), shared by out, in
// a pooling-shaped input.
Status expect_average_input(const OpArgs& op, const Tensor& in, const Tensor& out) {
  const bool average_dtype = in.dtype() == ScalarType::kLong || visit_floating_dtype(in.dtype(), [](auto) {});
  if (!average_dtype) {
    return op.program_error("self must be float32, float64 or int64, got " + in.describe());
  }
  ETNA_TRY(op.expect_dtype(out, "out", in.dtype()));
  return expect_pooling_input(op, in);
}

// The input pixels [y0, y1) x [x0, x1) an output pixel averages, and what
// their sum is divided by.
struct AverageWindow {
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0, divisor = 1;
};

// out[n, c, oy, ox] = sum of in over window(oy, ox) / its divisor. The
// accumulator is double for floating dtypes and int64 for int64, whose
// average truncates toward zero as ExecuTorch's does.
template <typename WindowFn>
void average_windows(const Tensor& in, Tensor& out, WindowFn&& window) {
  const Image src = image_of(in);
  const Image dst = image_of(out);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* in_data = in.data_as<T>();
    T* out_data = out.data_as<T>();
    for_each_pixel(dst, [&](int64_t n, int64_t c, int64_t oy, int64_t ox) {
      const AverageWindow w = window(oy, ox);
      Acc sum = 0;
      for (int64_t y = w.y0; y < w.y1; ++y) {
        for (int64_t x = w.x0; x < w.x1; ++x)
          sum = wrapping_add(sum, static_cast<Acc>(in_data[src.offset(n, c, y, x)]));
      }
      out_data[dst.offset(n, c, oy, ox)] = convert_value<T>(sum / static_cast<Acc>(w.divisor));
    });
  };
  if (in.dtype() == ScalarType::kLong) run(TypeTag<int64_t>{});
  else visit_floating_dtype(in.dtype(), run);
}

Status avg_pool2d_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(Window w, read_window(op, 1));
  ETNA_KERNEL_ASSIGN(bool ceil_mode, op.bool_arg(4, "ceil_mode"));
  ETNA_KERNEL_ASSIGN(bool count_include_pad, op.bool_arg(5, "count_include_pad"));
  ETNA_KERNEL_ASSIGN(std::optional<int64_t> divisor_override, op.optional_int_arg(6, "divisor_override"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(7, "out"));
  ETNA_TRY(expect_average_input(op, *in, *out));
  if (divisor_override && *divisor_override == 0) return op.input_error("divisor_override must not be 0");
  ETNA_KERNEL_ASSIGN(Shape shape, pooled_shape(op, *in, w, ceil_mode));
  ETNA_TRY(op.prepare_output(*out, shape, "out", false));
  const Image src = image_of(*in);
  average_windows(*in, *out, [&](int64_t oy, int64_t ox) {
    // The window clipped to the padded input counts padding; clipped to the
    // input it does not. A ceil_mode overhang past the padding never counts.
    AverageWindow a;
    a.y0 = oy * w.stride[0] - w.padding[0];
    a.x0 = ox * w.stride[1] - w.padding[1];
    a.y1 = std::min(a.y0 + w.kernel[0], src.height + w.padding[0]);
    a.x1 = std::min(a.x0 + w.kernel[1], src.width + w.padding[1]);
    const int64_t padded_count = (a.y1 - a.y0) * (a.x1 - a.x0);
    a.y0 = std::max<int64_t>(a.y0, 0);
    a.x0 = std::max<int64_t>(a.x0, 0);
    a.y1 = std::min(a.y1, src.height);
    a.x1 = std::min(a.x1, src.width);
    a.divisor = divisor_override ? *divisor_override : count_include_pad ? padded_count : (a.y1 - a.y0) * (a.x1 - a.x0);
    return a;
  });
  return Status::ok();
}

Status adaptive_avg_pool2d_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.strided_input(0, "self"));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> output_size, op.int_list_arg(1, "output_size"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(2, "out"));
  ETNA_TRY(expect_average_input(op, *in, *out));
  if (output_size.size() != 2 || output_size[0] < 1 || output_size[1] < 1 || output_size[0] >= kParamLimit ||
      output_size[1] >= kParamLimit) {
    return op.input_error("output_size must be 2 sizes in [1, 2^31)");
  }
  ETNA_TRY(op.prepare_output(*out, with_spatial(*in, output_size[0], output_size[1]), "out", false));
  const Image src = image_of(*in);
  const Image dst = image_of(*out);
  // Output cell o of n covers input [floor(o * in / n), ceil((o + 1) * in / n)).
  auto start = [](int64_t o, int64_t out_size, int64_t in_size) { return o * in_size / out_size; };
  auto end = [](int64_t o, int64_t out_size, int64_t in_size) { return ((o + 1) * in_size + out_size - 1) / out_size; };
  average_windows(*in, *out, [&](int64_t oy, int64_t ox) {
    AverageWindow a;
    a.y0 = start(oy, dst.height, src.height);
    a.y1 = end(oy, dst.height, src.height);
    a.x0 = start(ox, dst.width, src.width);
    a.x1 = end(ox, dst.width, src.width);
    a.divisor = (a.y1 - a.y0) * (a.x1 - a.x0);
    return a;
  });
  return Status::ok();
}

// --- _native_batch_norm_legit_no_training ------------------------------------------

// weight, bias, running_mean and running_var: [C] with input's dtype.
Status expect_channel_vector(const OpArgs& op, const Tensor* t, std::string_view name, const Tensor& in) {
  if (!t) return Status::ok();
  ETNA_TRY(op.expect_dtype(*t, name, in.dtype()));
  if (t->rank() != 1 || t->size(0) != in.size(1)) {
    return op.input_error(std::string(name) + " " + t->describe() + " must be [" + std::to_string(in.size(1)) +
                          "], one value per channel of input " + in.describe());
  }
  return Status::ok();
}

Status batch_norm_no_training_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.optional_input(1, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.optional_input(2, "bias"));
  ETNA_KERNEL_ASSIGN(Tensor * running_mean, op.input(3, "running_mean"));
  ETNA_KERNEL_ASSIGN(Tensor * running_var, op.input(4, "running_var"));
  ETNA_KERNEL_ASSIGN(double momentum, op.double_arg(5, "momentum"));
  (void)momentum;  // only updates running statistics in training
  ETNA_KERNEL_ASSIGN(double eps, op.double_arg(6, "eps"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(7, "out0"));
  ETNA_KERNEL_ASSIGN(Tensor * mean_out, op.output(8, "out1"));
  ETNA_KERNEL_ASSIGN(Tensor * invstd_out, op.output(9, "out2"));
  ETNA_TRY(op.expect_floating(*in, "input"));
  if (in->rank() < 2) return op.input_error("input " + in->describe() + " must have a channel dim (rank >= 2)");
  ETNA_TRY(expect_channel_vector(op, weight, "weight", *in));
  ETNA_TRY(expect_channel_vector(op, bias, "bias", *in));
  ETNA_TRY(expect_channel_vector(op, running_mean, "running_mean", *in));
  ETNA_TRY(expect_channel_vector(op, running_var, "running_var", *in));
  ETNA_TRY(op.expect_dtype(*out, "out0", in->dtype()));
  ETNA_TRY(op.expect_dtype(*mean_out, "out1", in->dtype()));
  ETNA_TRY(op.expect_dtype(*invstd_out, "out2", in->dtype()));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*in), "out0"));
  // Without training there are no batch statistics: both are empty.
  Shape empty;
  empty.rank = 1;
  empty[0] = 0;
  ETNA_TRY(op.prepare_output(*mean_out, empty, "out1"));
  ETNA_TRY(op.prepare_output(*invstd_out, empty, "out2"));
  const DimSplit split = split_at_dim(Shape::of(*in), 1);
  visit_floating_dtype(in->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in->data_as<T>();
    T* y = out->data_as<T>();
    const T* mean = running_mean->data_as<T>();
    const T* var = running_var->data_as<T>();
    for (int64_t o = 0; o < split.outer; ++o) {
      for (int64_t c = 0; c < split.size; ++c) {
        const T invstd = static_cast<T>(1.0 / std::sqrt(var[c] + eps));
        const T scale = weight ? weight->data_as<T>()[c] : T(1);
        const T shift = bias ? bias->data_as<T>()[c] : T(0);
        const int64_t row = (o * split.size + c) * split.inner;
        for (int64_t i = 0; i < split.inner; ++i) y[row + i] = (x[row + i] - mean[c]) * invstd * scale + shift;
      }
    }
  });
  return Status::ok();
}

// --- upsample_nearest2d / upsample_bilinear2d ---------------------------------------

// A `float[]?` argument (scale_factors).
Result<std::optional<std::vector<double>>> optional_double_list(const OpArgs& op, size_t index, std::string_view name) {
  ETNA_KERNEL_ASSIGN(const EValue* v, op.value(index, name));
  if (v->is_none()) return std::optional<std::vector<double>>();
  if (v->kind() != EValue::Kind::kDoubleList) {
    return op.program_error(OpArgs::arg_label(index, name) + ": expected a DoubleList or None, got " +
                            kind_name(v->kind()));
  }
  std::vector<double> items(v->list_size());
  for (size_t i = 0; i < items.size(); ++i) items[i] = v->double_item(i);
  return std::optional<std::vector<double>>(std::move(items));
}

// The output shape and, per spatial dim, the scale ExecuTorch derives:
// scale_factors as given, or output_size / input_size.
struct UpsamplePlan {
  Shape shape;
  std::array<double, 2> scale{};
};

// Also checks dtypes and shapes `out` (read through strides like `in`).
Result<UpsamplePlan> plan_upsample(const OpArgs& op, const Tensor& in, Tensor& out, size_t output_size_index,
                                   size_t scale_factors_index) {
  ETNA_TRY(expect_same_numeric_dtype(op, in, "input", out));
  if (in.rank() != 4 || in.size(2) < 1 || in.size(3) < 1) {
    return op.input_error("input " + in.describe() + " must be [N, C, H, W] with non-empty H and W");
  }
  ETNA_KERNEL_ASSIGN(OptionalIntList output_size, op.optional_int_list_arg(output_size_index, "output_size"));
  ETNA_KERNEL_ASSIGN(auto scale_factors, optional_double_list(op, scale_factors_index, "scale_factors"));
  if (output_size.present == scale_factors.has_value()) {
    return op.input_error("exactly one of output_size and scale_factors must be given");
  }
  UpsamplePlan plan;
  std::array<int64_t, 2> sizes{};
  const std::array<int64_t, 2> in_sizes = {in.size(2), in.size(3)};
  if (scale_factors) {
    if (scale_factors->size() != 2) return op.input_error("scale_factors must have 2 entries");
    for (size_t i = 0; i < 2; ++i) {
      const double s = (*scale_factors)[i];
      // Bounded so the truncated output size stays representable.
      if (!(s > 0) || static_cast<double>(in_sizes[i]) * s >= static_cast<double>(kParamLimit)) {
        return op.input_error("scale_factors must be positive and keep the output under 2^31, got " +
                              std::to_string(s));
      }
      plan.scale[i] = s;
      sizes[i] = static_cast<int64_t>(static_cast<double>(in_sizes[i]) * s);
    }
  } else {
    if (output_size.items.size() != 2) return op.input_error("output_size must have 2 entries");
    for (size_t i = 0; i < 2; ++i) {
      sizes[i] = output_size.items[i];
      if (sizes[i] < 1 || sizes[i] >= kParamLimit) {
        return op.input_error("output_size entries must be in [1, 2^31), got " + std::to_string(sizes[i]));
      }
      plan.scale[i] = static_cast<double>(sizes[i]) / static_cast<double>(in_sizes[i]);
    }
  }
  if (sizes[0] < 1 || sizes[1] < 1) {
    return op.input_error("the upsampled size of input " + in.describe() + " would be empty");
  }
  plan.shape = with_spatial(in, sizes[0], sizes[1]);
  ETNA_TRY(op.prepare_output(out, plan.shape, "out", false));
  return plan;
}

// Output coordinate d reads input coordinate d * (1 / scale) (PyTorch's
// "nearest", rounding down), clamped to the last input index.
int64_t nearest_source(float ratio, int64_t d, int64_t in_size) {
  return std::min(static_cast<int64_t>(std::floor(static_cast<float>(d) * ratio)), in_size - 1);
}

Status upsample_nearest2d_vec_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.strided_input(0, "input"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(3, "out"));
  ETNA_KERNEL_ASSIGN(UpsamplePlan plan, plan_upsample(op, *in, *out, 1, 2));
  const Image src = image_of(*in);
  const Image dst = image_of(*out);
  const float ratio_h = static_cast<float>(1.0 / plan.scale[0]);
  const float ratio_w = static_cast<float>(1.0 / plan.scale[1]);
  const size_t element = in->element_size();
  const auto* in_bytes = static_cast<const uint8_t*>(in->data());
  auto* out_bytes = static_cast<uint8_t*>(out->data());
  for_each_pixel(dst, [&](int64_t n, int64_t c, int64_t oy, int64_t ox) {
    const int64_t from =
        src.offset(n, c, nearest_source(ratio_h, oy, src.height), nearest_source(ratio_w, ox, src.width));
    std::copy_n(in_bytes + from * static_cast<int64_t>(element), element,
                out_bytes + dst.offset(n, c, oy, ox) * static_cast<int64_t>(element));
  });
  return Status::ok();
}

// The two input coordinates an output coordinate interpolates between and
// the weight of each (PyTorch's area_pixel source index with clamping).
struct LinearTap {
  int64_t index0 = 0, index1 = 0;
  float weight0 = 1, weight1 = 0;
};

LinearTap linear_tap(float ratio, int64_t d, int64_t in_size, int64_t out_size, bool align_corners) {
  LinearTap tap;
  if (in_size == out_size) {
    tap.index0 = tap.index1 = d;
    return tap;
  }
  float real = align_corners ? ratio * static_cast<float>(d) : ratio * (static_cast<float>(d) + 0.5f) - 0.5f;
  if (!align_corners && real < 0) real = 0;
  tap.index0 = std::min(static_cast<int64_t>(std::floor(real)), in_size - 1);
  tap.weight1 = std::min(std::max(real - static_cast<float>(tap.index0), 0.0f), 1.0f);
  tap.index1 = tap.index0 + (tap.index0 < in_size - 1 ? 1 : 0);
  tap.weight0 = 1.0f - tap.weight1;
  return tap;
}

// The input-per-output step: (in - 1) / (out - 1) with align_corners (0 for
// a single output), else 1 / scale.
float bilinear_ratio(int64_t in_size, int64_t out_size, bool align_corners, double scale) {
  if (align_corners) {
    return out_size > 1 ? static_cast<float>(static_cast<double>(in_size - 1) / static_cast<double>(out_size - 1))
                        : 0.0f;
  }
  return static_cast<float>(1.0 / scale);
}

Status upsample_bilinear2d_vec_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * in, op.strided_input(0, "input"));
  ETNA_KERNEL_ASSIGN(bool align_corners, op.bool_arg(2, "align_corners"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(4, "out"));
  ETNA_KERNEL_ASSIGN(UpsamplePlan plan, plan_upsample(op, *in, *out, 1, 3));
  const Image src = image_of(*in);
  const Image dst = image_of(*out);
  const float ratio_h = bilinear_ratio(src.height, dst.height, align_corners, plan.scale[0]);
  const float ratio_w = bilinear_ratio(src.width, dst.width, align_corners, plan.scale[1]);
  std::vector<LinearTap> columns(static_cast<size_t>(dst.width));
  for (int64_t x = 0; x < dst.width; ++x) {
    columns[static_cast<size_t>(x)] = linear_tap(ratio_w, x, src.width, dst.width, align_corners);
  }
  visit_real_dtype(in->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Weights are float; double inputs keep double arithmetic.
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const void* in_data = in->data();
    void* out_data = out->data();
    for (int64_t n = 0; n < dst.batch; ++n) {
      for (int64_t c = 0; c < dst.channels; ++c) {
        for (int64_t y = 0; y < dst.height; ++y) {
          const LinearTap row = linear_tap(ratio_h, y, src.height, dst.height, align_corners);
          for (int64_t x = 0; x < dst.width; ++x) {
            const LinearTap& col = columns[static_cast<size_t>(x)];
            auto at = [&](int64_t iy, int64_t ix) {
              return static_cast<C>(load_element<T>(in_data, src.offset(n, c, iy, ix)));
            };
            const C top = at(row.index0, col.index0) * col.weight0 + at(row.index0, col.index1) * col.weight1;
            const C bottom = at(row.index1, col.index0) * col.weight0 + at(row.index1, col.index1) * col.weight1;
            store_element<T>(out_data, dst.offset(n, c, y, x),
                             convert_value<T>(top * row.weight0 + bottom * row.weight1));
          }
        }
      }
    }
  });
  return Status::ok();
}

}  // namespace

void register_pooling_kernels(KernelRegistry& registry) {
  registry.add({"aten::max_pool2d_with_indices.out", 9, max_pool2d_with_indices_out});
  registry.add({"aten::avg_pool2d.out", 9, avg_pool2d_out});
  registry.add({"aten::_adaptive_avg_pool2d.out", 4, adaptive_avg_pool2d_out});
  registry.add({"aten::_native_batch_norm_legit_no_training.out", 11, batch_norm_no_training_out});
  registry.add({"aten::upsample_nearest2d.vec_out", 5, upsample_nearest2d_vec_out});
  registry.add({"aten::upsample_bilinear2d.vec_out", 6, upsample_bilinear2d_vec_out});
}

}  // namespace etna::kernels
