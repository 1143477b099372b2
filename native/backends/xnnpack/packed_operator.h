// Fully-connected, convolution, depthwise-convolution and transposed-
// convolution nodes run as XNNPACK operators (through xnn_compat.h) rather
// than subgraph nodes, or as etna kernels shared the same way
// (fully-connected nodes over dynamically quantized inputs as DynamicLinear,
// convolutions over them as DynamicConv, transposed convolutions whose kernel
// is their stride as PatchDeconvolution): an operator packs its weights once
// when created and
// takes the batch and spatial size at each setup. So one operator serves
// every module, delegate instance, method and input shape of a program that
// has the same node over the same constants: packed weights exist once per
// program.
//
// Setup writes the shape and buffer pointers into the operator object, so
// setup and run of one operator are serialised by a mutex: modules calling at
// once on their call threads take turns per operator. (The XNNPACK release this
// runs on has no weights cache, which would let each module keep an operator
// object of its own over shared packed weights.)
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/xnnpack/dynamic_conv.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/node_types.h"
#include "backends/xnnpack/patch_deconvolution.h"
#include "backends/xnnpack/xnn_compat.h"
#include "backends/xnnpack/xnn_library.h"
#include "core/status.h"

namespace etna::xnn {

class PackedOperator {
 public:
  // Everything that decides the packed weights and the operator's fixed
  // parameters, as bytes: node kind, datatypes, geometry, flags, bounds,
  // quantization, and the identities of the filter and bias constants.
  // kKeepNan adds itself for the fp32 operators it changes. A scale list
  // enters as `scales_identity` names it (by default the list's own
  // identity; a program names equal lists of its payloads alike).
  using ScalesIdentity = std::function<const void*(const ScaleList&)>;
  static std::string cache_key(const Graph& graph, const Node& node, NanHandling handling,
                               const ScalesIdentity& scales_identity = nullptr);

  // Creates the operator, packing the node's constant filter and bias (their
  // spans must be valid now; they are not referenced afterwards). Under
  // kKeepNan an fp32 XNNPACK operator is created unbounded and run() finishes
  // its output: a NaN the kernel's clamp turned into an infinity is found by
  // a run on the negated input, then the node's bounds are applied keeping
  // NaN (output_bounds.h); a bias holding NaN or an infinity is added there.
  // A fully-connected row holding NaN is NaN throughout, and an infinity that
  // meets a zero weight makes NaN: some releases' kernels skip zero weights
  // (the 2024 one's K-remainder masks the input where the weight is zero).
  // etna's own packings split over `pool` (null: the calling thread only).
  static Result<std::unique_ptr<PackedOperator>> create(const Graph& graph, const Node& node, NanHandling handling,
                                                        pthreadpool_t pool = nullptr);

  // Sets the operator up for this input shape and buffers, then runs it.
  // Thread-safe: one caller at a time.
  Status run(const Node& node, const Shape& input_shape, const void* input, const Shape& output_shape, void* output,
             pthreadpool_t threadpool);

  // Bytes XNNPACK allocated when creating the operator (the packed weights
  // plus the operator object), or the unpacked constant size when the
  // allocation meter is unavailable.
  size_t packed_bytes() const { return packed_bytes_; }

 private:
  enum class Kind : uint8_t { kFullyConnected, kConvolution, kDeconvolution };
  enum class Arithmetic : uint8_t { kF32, kQS8, kQU8, kQC8 };

  PackedOperator() = default;

  // Sets op_ up for `size` and these buffers and runs it (run_mutex_ held).
  compat::Outcome run_operator(const compat::ImageSize& size, const void* input, void* output,
                               pthreadpool_t threadpool);
  // kKeepNan: NaN back where the unbounded kernel clamped it, then the late
  // bias and the node's bounds (run_mutex_ held).
  Status finish_keeping_nan(const Node& node, const compat::ImageSize& size, const Shape& input_shape,
                            const void* input, const Shape& output_shape, float* output, pthreadpool_t threadpool);
  // keeps_nan_ fully connected: NaN where a row's input is NaN or an
  // infinity meets a zero weight, whatever the kernel made of them.
  void mark_fully_connected_nan(const float* input, size_t rows, size_t channels, float* output) const;
  void find_zero_weights(const float* filter, size_t k, size_t n, bool transposed);

  Kind kind_ = Kind::kFullyConnected;
  Arithmetic arithmetic_ = Arithmetic::kF32;
  bool fully_connected_as_convolution_ = false;  // per-channel int8 FC runs as a 1x1 convolution
  size_t input_channels_ = 0;
  uint32_t adjustment_height_ = 0;
  uint32_t adjustment_width_ = 0;
  size_t packed_bytes_ = 0;
  bool keeps_nan_ = false;                                // kKeepNan fp32 XNNPACK operator: run() finishes the output
  float output_min_ = -INFINITY, output_max_ = INFINITY;  // the node's, applied by run() when keeps_nan_
  std::vector<float> late_bias_;                          // keeps_nan_: a bias with NaN or infinities, added by run()
  // keeps_nan_ fully connected: for input channel k, the output channels whose
  // weight is zero are zero_weight_channels_[zero_weight_starts_[k] ..
  // zero_weight_starts_[k + 1]).
  std::vector<size_t> zero_weight_starts_;
  std::vector<uint32_t> zero_weight_channels_;
  std::mutex run_mutex_;  // setup writes into op_
  OperatorPtr op_;
  std::unique_ptr<DynamicLinear> dynamic_;     // instead of op_: qdint8 input (etna's kernels)
  std::unique_ptr<DynamicConv> dynamic_conv_;  // the same for a convolution
  std::unique_ptr<PatchDeconvolution> patch_;  // instead of op_: non-overlapping transposed convolution
};

}  // namespace etna::xnn
