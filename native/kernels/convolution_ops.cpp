// aten::convolution.out for 1-D and 2-D convolutions (not transposed) with
// stride, padding, dilation and groups: the portable fallback for programs
// whose convolutions were not delegated.

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/dtype_promotion.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"

namespace etna::kernels {
namespace {

// Sizes of one 2-D problem (a 1-D convolution is one with height 1).
struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  int64_t in_h = 1, in_w = 1, kernel_h = 1, kernel_w = 1, out_h = 1, out_w = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

// Reads a per-spatial-dim list (one value applies to every dim).
Result<std::vector<int64_t>> spatial_list(const OpArgs& op, size_t index, std::string_view name, size_t spatial,
                                          int64_t minimum) {
  // Keeps the output-size arithmetic far from int64 overflow.
  constexpr int64_t kLimit = int64_t(1) << 31;
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> values, op.int_list_arg(index, name));
  if (values.size() == 1) values.assign(spatial, values[0]);
  if (values.size() != spatial) {
    return op.input_error(std::string(name) + " must have 1 or " + std::to_string(spatial) + " entries, got " +
                          std::to_string(values.size()));
  }
  for (int64_t v : values) {
    if (v < minimum || v >= kLimit) {
      return op.input_error(std::string(name) + " entries must be in [" + std::to_string(minimum) + ", 2^31), got " +
                            std::to_string(v));
    }
  }
  return values;
}

template <typename T>
void convolve(const ConvGeometry& g, const T* input, const T* weight, const T* bias, T* output) {
  const int64_t in_per_group = g.in_channels / g.groups;
  const int64_t out_per_group = g.out_channels / g.groups;
  const int64_t in_plane = g.in_h * g.in_w;
  const int64_t out_plane = g.out_h * g.out_w;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oc = 0; oc < g.out_channels; ++oc) {
      T* out = output + (n * g.out_channels + oc) * out_plane;
      std::fill(out, out + out_plane, bias ? bias[oc] : T(0));
      const int64_t group = oc / out_per_group;
      for (int64_t icg = 0; icg < in_per_group; ++icg) {
        const int64_t ic = group * in_per_group + icg;
        const T* in = input + (n * g.in_channels + ic) * in_plane;
        const T* w = weight + (oc * in_per_group + icg) * g.kernel_h * g.kernel_w;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const T wv = w[kh * g.kernel_w + kw];
            for (int64_t oh = 0; oh < g.out_h; ++oh) {
              const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
              if (ih < 0 || ih >= g.in_h) continue;
              T* out_row = out + oh * g.out_w;
              const T* in_row = in + ih * g.in_w;
              for (int64_t ow = 0; ow < g.out_w; ++ow) {
                const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
                if (iw >= 0 && iw < g.in_w) out_row[ow] += wv * in_row[iw];
              }
            }
          }
        }
      }
    }
  }
}

Status convolution_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.input(1, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * bias, op.optional_input(2, "bias"));
  ETNA_KERNEL_ASSIGN(bool transposed, op.bool_arg(6, "transposed"));
  ETNA_KERNEL_ASSIGN(int64_t groups, op.int_arg(8, "groups"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(9, "out"));
  if (transposed) return op.unsupported("transposed convolutions are not supported");
  ETNA_TRY(op.expect_floating(*input, "input"));
  ETNA_TRY(op.expect_dtype(*weight, "weight", input->dtype()));
  if (bias) ETNA_TRY(op.expect_dtype(*bias, "bias", input->dtype()));
  ETNA_TRY(op.expect_dtype(*out, "out", input->dtype()));
  const size_t rank = input->rank();
  if (rank != 3 && rank != 4) {
    return op.unsupported("input " + input->describe() + " must be [N, C, W] or [N, C, H, W]");
  }
  ETNA_TRY(op.expect_rank(*weight, "weight", rank));
  const size_t spatial = rank - 2;
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> stride, spatial_list(op, 3, "stride", spatial, 1));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> padding, spatial_list(op, 4, "padding", spatial, 0));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> dilation, spatial_list(op, 5, "dilation", spatial, 1));
  ETNA_KERNEL_ASSIGN(std::vector<int64_t> output_padding, op.int_list_arg(7, "output_padding"));
  (void)output_padding;  // only meaningful for transposed convolutions

  ConvGeometry g;
  g.batch = input->size(0);
  g.in_channels = input->size(1);
  g.out_channels = weight->size(0);
  g.groups = groups;
  if (groups < 1 || g.in_channels % groups != 0 || g.out_channels % groups != 0) {
    return op.input_error("groups " + std::to_string(groups) + " must divide the input channels (" +
                          std::to_string(g.in_channels) + ") and output channels (" + std::to_string(g.out_channels) +
                          ")");
  }
  if (weight->size(1) != g.in_channels / groups) {
    return op.input_error("weight " + weight->describe() + " must have " + std::to_string(g.in_channels / groups) +
                          " input channels per group for input " + input->describe());
  }
  if (bias && (bias->rank() != 1 || bias->size(0) != g.out_channels)) {
    return op.input_error("bias " + bias->describe() + " must have shape [" + std::to_string(g.out_channels) + "]");
  }
  // Spatial dims; a 1-D convolution uses height 1.
  const size_t first = 2;
  if (spatial == 2) {
    g.in_h = input->size(first);
    g.kernel_h = weight->size(first);
    g.stride_h = stride[0];
    g.pad_h = padding[0];
    g.dilation_h = dilation[0];
  }
  g.in_w = input->size(rank - 1);
  g.kernel_w = weight->size(rank - 1);
  g.stride_w = stride[spatial - 1];
  g.pad_w = padding[spatial - 1];
  g.dilation_w = dilation[spatial - 1];
  auto output_size = [](int64_t in, int64_t kernel, int64_t stride_value, int64_t pad, int64_t dil) {
    const int64_t span = in + 2 * pad - dil * (kernel - 1) - 1;
    return span < 0 ? int64_t(-1) : span / stride_value + 1;
  };
  g.out_h = output_size(g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dilation_h);
  g.out_w = output_size(g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dilation_w);
  if (g.out_h < 0 || g.out_w < 0) {
    return op.input_error("kernel " + weight->describe() + " is larger than the padded input " + input->describe());
  }
  Shape shape;
  shape.rank = rank;
  shape[0] = g.batch;
  shape[1] = g.out_channels;
  if (spatial == 2) shape[2] = g.out_h;
  shape[rank - 1] = g.out_w;
  ETNA_TRY(op.prepare_output(*out, shape));
  visit_floating_dtype(input->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    convolve<T>(g, input->data_as<T>(), weight->data_as<T>(), bias ? bias->data_as<T>() : nullptr, out->data_as<T>());
  });
  return Status::ok();
}

}  // namespace

void register_convolution_kernels(KernelRegistry& registry) {
  registry.add({"aten::convolution.out", 11, convolution_out});
}

}  // namespace etna::kernels
