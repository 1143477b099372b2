// Dynamically quantized fully connected layers (what ExecuTorch's 8da4w and
// 8da8w linear layers export): fp32 activations quantized per row at run time
// to 8 bits (Convert fp32 -> qdint8), times constant weights quantized per
// output channel to 8 bits (qcint8) or 4 bits (qcint4), or per channel and
// block of input channels to 4 bits (qbint4), into fp32 outputs. The linked
// XNNPACK has none of this, so these are etna's kernels.
//
// Weights are repacked once, when the program's packed operator is created,
// and shared like XNNPACK's packed weights (packed_operator.h; the layout:
// dynamic_linear_layout.h). Integer dot products run on the best instruction
// set the CPU offers, chosen at run time (dot_path.h): AVX-512 VNNI (vpdpbusd
// on 256-bit registers, 512-bit ones for tiles of eight rows), AVX2, or
// portable code (dynamic_linear_kernels.h). Every path computes the same
// int32 block sums and combines them in the same order, so all paths give
// bit-identical outputs.
#pragma once

#include <pthreadpool.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/node_types.h"
#include "core/status.h"

namespace etna::xnn {

// Convert fp32 -> qdint8 (etna kernel row): one scale and zero point per row
// of the output's num_nonbatch_dims trailing dims (a token, or a whole image
// for a convolution), chosen as XNNPACK's qd8 conversion chooses them.
Status quantize_per_token_kernel(const EtnaKernelCall& call);

class DynamicLinear {
 public:
  // Repacks the node's constant filter (and copies its bias), split over
  // `pool` (null: the calling thread only); the constants' spans must be
  // valid now and are not referenced afterwards.
  static Result<std::unique_ptr<DynamicLinear>> create(const Graph& graph, const Node& node,
                                                       pthreadpool_t pool = nullptr);

  // `input` is a qdint8 buffer of `input_shape` (data then row parameters).
  // Large products are split over `threadpool` (null: the calling thread
  // only); the outputs are the same whatever the split (parallel.h).
  Status run(const Node& node, const Shape& input_shape, const void* input, float* output,
             pthreadpool_t threadpool) const;

  size_t packed_bytes() const;

 private:
  DynamicLinear() = default;

  size_t out_channels_ = 0;  // N
  size_t in_channels_ = 0;   // K
  size_t padded_in_ = 0;     // K rounded up to 64
  size_t padded_out_ = 0;    // N rounded up to whole panels (dynamic_linear_layout.h)
  size_t block_length_ = 0;  // input channels per scale (padded_in_ for per-channel)
  size_t blocks_ = 0;        // scales per output channel
  bool four_bit_ = false;
  bool blockwise_ = false;
  float output_min_ = 0, output_max_ = 0;
  // Panels of codes, with blockwise layouts' bf16 scales (dynamic_linear_layout.h: PanelLayout).
  std::vector<uint8_t> codes_;
  std::vector<float> channel_scales_;  // per-channel layouts: per channel
  std::vector<int32_t> weight_sums_;   // per-channel layouts: each channel's signed weights summed
  std::vector<float> scaled_sums_;     // blockwise layouts: each channel's block scales times weight sums, summed
  std::vector<float> bias_;            // per channel (zeros without bias)
};

}  // namespace etna::xnn
