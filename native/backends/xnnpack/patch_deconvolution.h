// fp32 transposed convolutions whose kernel equals their stride, without
// padding, dilation, adjustment or groups (the x2 upsampling heads of
// detectors such as DBNet). Each input pixel then writes its own
// kernel-sized patch of the output, and nothing overlaps, so the whole node is
// one matrix product per input row: [width x in_channels] times the filter
// taken as [in_channels x kernel_h * kernel_w * out_channels]. The linked
// XNNPACK runs these through its general deconvolution, several times slower
// at the few channels such heads have.
//
// Weights are repacked once, when the program's packed operator is created,
// and shared like XNNPACK's packed weights (packed_operator.h). The products
// run on matmul_f32 (matmul_kernels.h), so they take the same instruction-set
// path, and each output sums its input channels in order before the bias.
#pragma once

#include <pthreadpool.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "core/status.h"

namespace etna::xnn {

class PatchDeconvolution {
 public:
  // Whether `node` is a transposed convolution this class runs.
  static bool handles(const Graph& graph, const Node& node);

  // Repacks the node's constant filter and bias; their spans must be valid
  // now and are not referenced afterwards.
  static Result<std::unique_ptr<PatchDeconvolution>> create(const Graph& graph, const Node& node);

  // `input` is NHWC [batch, height, width, in_channels]; `output` receives
  // [batch, height * kernel_h, width * kernel_w, out_channels]. Thread-safe.
  // Large inputs split their rows over `threadpool` (null: the calling
  // thread only).
  void run(const Shape& input_shape, const float* input, float* output, pthreadpool_t threadpool) const;

  size_t packed_bytes() const { return (by_row_.size() + by_pixel_.size() + bias_.size()) * sizeof(float); }

 private:
  PatchDeconvolution() = default;

  // Output positions and channels per input pixel, in the order of the
  // filter columns below: (ky, kx, out channel).
  size_t patch_columns() const { return kernel_h_ * kernel_w_ * out_channels_; }
  // One output row of a patch (kx, out channel): contiguous in the output.
  size_t row_columns() const { return kernel_w_ * out_channels_; }
  // Narrow patch rows leave most of a vector register idle when a product
  // covers one patch row, so those take the whole row of pixels as columns.
  bool by_pixel() const { return !by_pixel_.empty(); }
  // Input rows [first, end) into their output rows.
  void run_by_row(size_t first, size_t end, size_t width, const float* input, float* output) const;
  // The same through `products`: patch_columns() * width floats.
  void run_by_pixel(size_t first, size_t end, size_t width, const float* input, float* output, float* products) const;

  size_t kernel_h_ = 0, kernel_w_ = 0;
  size_t in_channels_ = 0, out_channels_ = 0;
  float output_min_ = 0, output_max_ = 0;
  // Wide rows: per ky, [in_channels][kernel_w * out_channels].
  std::vector<float> by_row_;
  // Narrow rows: [kernel_h * kernel_w * out_channels][in_channels].
  std::vector<float> by_pixel_;
  std::vector<float> bias_;  // per out channel (zeros without bias)
};

}  // namespace etna::xnn
