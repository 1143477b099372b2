// Dynamically quantized 2-d convolution (qd8-f32-qc8w, what ExecuTorch's
// XNNPACK quantizer exports for a convolution with is_dynamic=True): the fp32
// NHWC input quantized at run time to 8 bits with one scale and zero point per
// image (Convert fp32 -> qdint8 with num_nonbatch_dims 3), times a constant
// [out, kh, kw, in/groups] filter quantized per output channel to 8 bits, into
// fp32 outputs. The linked XNNPACK has none of this, so it is etna's kernel.
//
// Each group's filter is a fully connected layer over the group's receptive
// field, packed once (a DynamicLinear per group, shared per program through
// packed_operator.h); a run gathers each output pixel's field of int8 codes
// (im2col, padding taking the image's zero point, which stands for 0.0) and
// runs the groups' dot products on DynamicLinear's paths.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/graph.h"
#include "core/status.h"

namespace etna::xnn {

class DynamicConv {
 public:
  // Repacks the node's constant filter (and copies its bias); the constants'
  // spans must be valid now and are not referenced afterwards. The node has
  // passed check_graph (XNNConv2d, qcint8 filter, no SAME padding).
  // Packing is split over `pool` (null: the calling thread only).
  static Result<std::unique_ptr<DynamicConv>> create(const Graph& graph, const Node& node,
                                                     pthreadpool_t pool = nullptr);

  // `input` is a qdint8 NHWC buffer of `input_shape` (data, then one row
  // parameter per image); `output` the NHWC fp32 output the shape rule gives.
  // `node` is the one the object was created for (or one with the same packed
  // operator cache key, hence the same geometry). Large convolutions split
  // their pixel tiles over `threadpool` (null: the calling thread only).
  Status run(const Node& node, const Shape& input_shape, const void* input, float* output,
             pthreadpool_t threadpool) const;

  size_t packed_bytes() const;

 private:
  DynamicConv() = default;

  std::vector<std::unique_ptr<DynamicLinear>> group_layers_;  // one per group
};

}  // namespace etna::xnn
