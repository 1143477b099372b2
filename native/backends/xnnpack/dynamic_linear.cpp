#include "backends/xnnpack/dynamic_linear.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "backends/xnnpack/dynamic_linear_kernels.h"
#include "backends/xnnpack/dynamic_linear_layout.h"
#include "backends/xnnpack/output_bounds.h"
#include "backends/xnnpack/parallel.h"

namespace etna::xnn {
namespace {

using dynamic_linear_detail::DotRows;
using dynamic_linear_detail::kChunk;
using dynamic_linear_detail::kColumns;
using dynamic_linear_detail::kPanelChannels;
using dynamic_linear_detail::kPanelGroups;
using dynamic_linear_detail::pack_panels;
using dynamic_linear_detail::PackedView;
using dynamic_linear_detail::PackSource;
using dynamic_linear_detail::PackTarget;
using dynamic_linear_detail::PanelLayout;
using dynamic_linear_detail::path_kernels;
using dynamic_linear_detail::PathKernels;
using dynamic_linear_detail::quantize_row;
using dynamic_linear_detail::round_up;

constexpr size_t kTileRows = 16;  // activation rows a task multiplies at once

// A column block's packed weights: about what stays in a core's L2 cache
// while a batch's row tiles pass over them.
constexpr size_t kBlockWeightBytes = size_t{128} << 10;
constexpr size_t kMaxBlockGroups = 32;  // 256 channels: a task's sums stay a 16 KiB stack array

}  // namespace

Status quantize_per_token_kernel(const EtnaKernelCall& call) {
  const Shape& shape = call.shapes[call.node.outputs[0]];
  const size_t row_length = dynamic_row_length(shape, call.graph.values[call.node.outputs[0]].quant.nonbatch_dims);
  const size_t rows = row_length ? shape.numel() / row_length : 0;
  const float* input = static_cast<const float*>(call.data[call.node.inputs[0]]);
  uint8_t* output = static_cast<uint8_t*>(call.data[call.node.outputs[0]]);
  auto* params = reinterpret_cast<DynamicRowParams*>(output + dynamic_params_offset(shape));
  const PathKernels& kernels = path_kernels(active_dot_path());
  // Rows are independent: each task quantizes a run of whole rows.
  const size_t tasks = std::min(rows, task_count(call.threadpool, rows * row_length, kMinTaskElements));
  const size_t rows_per_task = block_size(rows, tasks, 1);
  parallel_for(pool_for(call.threadpool, tasks), divide_up(rows, rows_per_task), [&](size_t task) {
    const size_t end = std::min(rows, (task + 1) * rows_per_task);
    for (size_t r = task * rows_per_task; r < end; ++r) {
      const DynamicRowParams row = quantize_row(kernels, input + r * row_length, row_length, output + r * row_length);
      std::memcpy(params + r, &row, sizeof row);
    }
  });
  return Status::ok();
}

Result<std::unique_ptr<DynamicLinear>> DynamicLinear::create(const Graph& graph, const Node& node, pthreadpool_t pool) {
  const Value& filter = graph.values[node.inputs[1]];
  const Value* bias = node.inputs[2] == kNoValue ? nullptr : &graph.values[node.inputs[2]];
  const bool transposed = node.flags & 0x1;
  std::unique_ptr<DynamicLinear> linear(new DynamicLinear());
  DynamicLinear& l = *linear;
  l.out_channels_ = filter.shape.dims[transposed ? 1 : 0];
  l.in_channels_ = filter.shape.dims[transposed ? 0 : 1];
  l.padded_in_ = std::max(kChunk, round_up(l.in_channels_, kChunk));
  l.padded_out_ = std::max(kPanelChannels, round_up(l.out_channels_, kPanelChannels));
  const bool four_bit = is_four_bit(filter.datatype);
  const bool blockwise = filter.quant.kind == Quantization::Kind::kBlockwise;
  const size_t block_length = blockwise ? filter.quant.block_size : l.padded_in_;
  const size_t blocks = blockwise ? l.in_channels_ / block_length : 1;
  l.block_length_ = block_length;
  l.blocks_ = blocks;
  l.four_bit_ = four_bit;
  l.blockwise_ = blockwise;
  const PanelLayout layout(block_length, blocks, four_bit, blockwise);
  l.output_min_ = node.output_min;
  l.output_max_ = node.output_max;
  const size_t n_count = l.out_channels_, k_count = l.in_channels_;
  if (filter.constant.size < constant_bytes(filter.datatype, filter.shape)) {
    return make_error(ErrorCode::kInternal, node.describe() + ": filter bytes missing at packing");
  }

  l.codes_.assign(l.padded_out_ / kPanelChannels * layout.panel_bytes, four_bit ? 0x88 : 0);
  if (blockwise) {
    l.scaled_sums_.assign(l.padded_out_, 0.0f);
  } else {
    l.channel_scales_.assign(l.padded_out_, 0.0f);
    l.weight_sums_.assign(l.padded_out_, 0);
  }
  l.bias_.assign(l.padded_out_, 0.0f);
  const PackSource from{filter.constant.data,
                        filter.quant.channel_scales,
                        n_count,
                        k_count,
                        four_bit ? (k_count + 1) / 2 : k_count,
                        transposed};
  PackTarget to{l.codes_.data(), l.channel_scales_.data(), l.weight_sums_.data(), l.scaled_sums_.data()};
  // Panels split over the pool: each task writes its own panels' bytes only.
  const size_t panels = l.padded_out_ / kPanelChannels;
  const size_t tasks = std::min(panels, task_count(pool, l.codes_.size(), kMinTaskBytes));
  const DotPath path = active_dot_path();
  std::atomic<bool> scales_are_bf16{true};
  parallel_for(pool_for(pool, tasks), tasks, [&](size_t task) {
    const size_t first = task * panels / tasks, end = (task + 1) * panels / tasks;
    if (!pack_panels(path, layout, from, to, first, end)) scales_are_bf16.store(false, std::memory_order_relaxed);
  });
  if (!scales_are_bf16.load()) {
    return make_error(ErrorCode::kInternal, node.describe() + ": a block scale is not a bf16 value");
  }
  if (bias && bias->constant.size) std::memcpy(l.bias_.data(), bias->constant.data, n_count * sizeof(float));
  return linear;
}

size_t DynamicLinear::packed_bytes() const {
  return codes_.size() + (channel_scales_.size() + scaled_sums_.size() + bias_.size()) * sizeof(float) +
         weight_sums_.size() * sizeof(int32_t);
}

Status DynamicLinear::run(const Node& node, const Shape& input_shape, const void* input, float* output,
                          pthreadpool_t threadpool) const {
  const size_t row_length = input_shape.rank ? input_shape.dims[input_shape.rank - 1] : 1;
  if (row_length != in_channels_) {
    return make_error(ErrorCode::kInvalidInput, node.describe() + ": input rows have " + std::to_string(row_length) +
                                                    " elements, the filter takes " + std::to_string(in_channels_));
  }
  const size_t rows = row_count(input_shape);
  if (rows == 0) return Status::ok();
  const uint8_t* data = static_cast<const uint8_t*>(input);
  const auto* params = reinterpret_cast<const DynamicRowParams*>(data + dynamic_params_offset(input_shape));
  const PanelLayout layout(block_length_, blocks_, four_bit_, blockwise_);
  const PathKernels* kernels = &path_kernels(active_dot_path());
  if (!kernels->takes_blocks(block_length_)) kernels = &path_kernels(DotPath::kScalar);
  const DotRows dot_rows = kernels->dot_rows(four_bit_);

  // Tiles of up to kTileRows rows by a block of channel groups. A block's
  // weights stay in cache while the row tiles of a batch reuse them, and a
  // thread's run of tiles walks its own part of the weights (a single row
  // splits the channels only). Blocks are whole panels, which the single-row
  // vector tiles take at once.
  const size_t groups = padded_out_ / kColumns;
  const size_t group_weight_bytes = layout.panel_bytes / kPanelGroups;
  size_t block_groups = std::min(
      kMaxBlockGroups, std::max(kPanelGroups, kBlockWeightBytes / group_weight_bytes / kPanelGroups * kPanelGroups));
  const size_t row_tiles = divide_up(rows, kTileRows);
  const size_t tasks = task_count(threadpool, rows * padded_out_ * in_channels_, kMinTaskIntegerMacs);
  if (tasks > row_tiles)
    block_groups = std::min(block_groups, block_size(groups, divide_up(tasks, row_tiles), kPanelGroups));
  const size_t column_blocks = divide_up(groups, block_groups);

  const bool clamped = has_finite_bound(output_min_, output_max_);
  parallel_for_2d(pool_for(threadpool, tasks), column_blocks, row_tiles, [&](size_t column_block, size_t row_tile) {
    const size_t first_group = column_block * block_groups;
    const size_t group_count = std::min(block_groups, groups - first_group);
    const size_t first_channel = first_group * kColumns;
    auto from = [&](const auto& per_channel) {
      return per_channel.empty() ? nullptr : per_channel.data() + first_channel;
    };
    const PackedView view{codes_.data() + first_group / kPanelGroups * layout.panel_bytes,
                          layout,
                          group_count * kColumns,
                          from(channel_scales_),
                          from(weight_sums_),
                          from(scaled_sums_)};
    // Rows are read whole chunks at a time: the bytes past a row are the next
    // row's or the buffer's read padding, and meet zero weights.
    alignas(32) float sums[kTileRows * kMaxBlockGroups * kColumns];
    // Zeroed: the kernel, called through a pointer, reads the first `count`
    // only, which GCC cannot see (-Wmaybe-uninitialized).
    const uint8_t* tile_rows[kTileRows] = {};
    DynamicRowParams tile_params[kTileRows];
    int32_t tile_zero_points[kTileRows] = {};
    const size_t first = row_tile * kTileRows;
    const size_t count = std::min(kTileRows, rows - first);
    for (size_t r = 0; r < count; ++r) {
      tile_rows[r] = data + (first + r) * row_length;
      std::memcpy(&tile_params[r], params + first + r, sizeof tile_params[r]);
      tile_zero_points[r] = tile_params[r].zero_point;
    }
    dot_rows(view, tile_rows, tile_zero_points, count, sums);
    // y = act_scale * (sum less the zero point's part) + bias, then the node's bounds.
    const size_t channels = std::min(out_channels_, first_channel + view.padded_out) - first_channel;
    for (size_t r = 0; r < count; ++r) {
      const float scale = tile_params[r].scale;
      float* out = output + (first + r) * out_channels_ + first_channel;
      const float* s = sums + r * view.padded_out;
      const float* bias = bias_.data() + first_channel;
      for (size_t n = 0; n < channels; ++n) out[n] = scale * s[n] + bias[n];
      if (clamped) clamp_keeping_nan(out, channels, output_min_, output_max_);
    }
  });
  return Status::ok();
}

}  // namespace etna::xnn
