#include "backends/xnnpack/packed_operator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backends/xnnpack/output_bounds.h"
#include "backends/xnnpack/xnn_compat.h"
#include "core/aligned.h"

namespace etna::xnn {
namespace {

// Appends fields to a binary key.
class KeyWriter {
 public:
  template <typename T>
  KeyWriter& add(const T& value) {
    key_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    return *this;
  }
  KeyWriter& add_text(const std::string& text) {
    add(text.size());
    key_ += text;
    return *this;
  }
  std::string take() { return std::move(key_); }

 private:
  std::string key_;
};

void add_value(KeyWriter& key, const Value& value, const PackedOperator::ScalesIdentity& scales_identity) {
  key.add(static_cast<int16_t>(value.datatype)).add(value.shape.rank);
  for (size_t d = 0; d < value.shape.rank; ++d) key.add(value.shape.dims[d]);
  key.add(static_cast<uint8_t>(value.quant.kind)).add(value.quant.scale).add(value.quant.zero_point);
  key.add(value.quant.channel_dim).add(value.quant.block_size).add(value.quant.channel_scales.size());
  // The list, not its millions of values: equal lists of a program are one list.
  const ScaleList& scales = value.quant.channel_scales;
  key.add(scales_identity ? scales_identity(scales) : scales.identity());
  key.add_text(value.constant_key);
}

// Constant bytes at an address aligned for their element type; copies only
// when the source is misaligned.
class AlignedConstant {
 public:
  explicit AlignedConstant(ByteSpan bytes) {
    if (reinterpret_cast<uintptr_t>(bytes.data) % 16 == 0 || bytes.size == 0) {
      data_ = bytes.data;
      return;
    }
    copy_ = allocate_aligned(bytes.size).data;
    if (copy_) std::memcpy(copy_.get(), bytes.data, bytes.size);
    data_ = copy_.get();
  }
  const void* data() const { return data_; }
  bool ok() const { return data_ != nullptr; }

 private:
  const void* data_ = nullptr;
  std::unique_ptr<uint8_t, AlignedFree> copy_;
};

int8_t quantized_bound_s8(float bound, const Quantization& q) {
  if (std::isinf(bound)) return bound < 0 ? -128 : 127;
  const float v = std::nearbyint(bound / q.scale) + static_cast<float>(q.zero_point);
  return static_cast<int8_t>(v < -128 ? -128 : v > 127 ? 127 : v);
}

uint8_t quantized_bound_u8(float bound, const Quantization& q) {
  if (std::isinf(bound)) return bound < 0 ? 0 : 255;
  const float v = std::nearbyint(bound / q.scale) + static_cast<float>(q.zero_point);
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// A per-channel int8 filter must be quantized along its output-channel dim.
Status check_channel_dim(const Value& filter, size_t expected, const std::string& where) {
  if (filter.quant.channel_dim == expected) return Status::ok();
  return make_error(ErrorCode::kUnsupportedOperator,
                    where + ": per-channel filter quantized along dim " + std::to_string(filter.quant.channel_dim) +
                        ", expected the output-channel dim " + std::to_string(expected));
}

// Calls an xnn_create_convolution2d_* or xnn_create_deconvolution2d_*
// function with the node's geometry, then `rest` (quantization, weights,
// bounds, flags), which is where the two families and their arithmetics differ.
template <typename Create, typename... Rest>
xnn_status create_image_operator(Create create, xnn_operator_t* op, const Node& node, Rest... rest) {
  const uint32_t groups = node.groups;
  const size_t group_in = node.group_input_channels;
  const size_t group_out = node.group_output_channels;
  return compat::create_operator(create, op, node.padding_top, node.padding_right, node.padding_bottom,
                                 node.padding_left, node.kernel_height, node.kernel_width, node.stride_height,
                                 node.stride_width, node.dilation_height, node.dilation_width, groups, group_in,
                                 group_out, groups * group_in, groups * group_out, rest...);
}

}  // namespace

namespace {

// Whether kKeepNan creates the node's operator unbounded (an fp32 XNNPACK
// operator; etna kernels behind a packed node keep NaN already).
bool finished_keeping_nan(const Graph& graph, const Node& node, NanHandling handling) {
  if (handling != NanHandling::kKeepNan) return false;
  if (graph.values[node.inputs[0]].datatype != Datatype::fp32) return false;
  return !PatchDeconvolution::handles(graph, node);
}

}  // namespace

std::string PackedOperator::cache_key(const Graph& graph, const Node& node, NanHandling handling,
                                      const ScalesIdentity& scales_identity) {
  KeyWriter key;
  key.add(static_cast<uint8_t>(finished_keeping_nan(graph, node, handling)));
  key.add(static_cast<uint8_t>(node.type)).add(node.flags).add(node.output_min).add(node.output_max);
  const uint32_t geometry[] = {node.padding_top,    node.padding_right,        node.padding_bottom,
                               node.padding_left,   node.kernel_height,        node.kernel_width,
                               node.stride_height,  node.stride_width,         node.dilation_height,
                               node.dilation_width, node.adjustment_height,    node.adjustment_width,
                               node.groups,         node.group_input_channels, node.group_output_channels};
  for (uint32_t g : geometry) key.add(g);
  // Input and output contribute datatype and quantization only: shapes vary per call.
  for (uint32_t index : {node.inputs[0], node.outputs[0]}) {
    const Value& v = graph.values[index];
    key.add(static_cast<int16_t>(v.datatype)).add(v.quant.scale).add(v.quant.zero_point);
  }
  add_value(key, graph.values[node.inputs[1]], scales_identity);
  if (node.inputs[2] == kNoValue) {
    key.add_text("no bias");
  } else {
    add_value(key, graph.values[node.inputs[2]], scales_identity);
  }
  return key.take();
}

Result<std::unique_ptr<PackedOperator>> PackedOperator::create(const Graph& graph, const Node& node,
                                                               NanHandling handling, pthreadpool_t pool) {
  const Value& input = graph.values[node.inputs[0]];
  const Value& filter = graph.values[node.inputs[1]];
  const Value* bias = node.inputs[2] == kNoValue ? nullptr : &graph.values[node.inputs[2]];
  const Value& output = graph.values[node.outputs[0]];
  const std::string where = node.describe();

  std::unique_ptr<PackedOperator> packed(new PackedOperator());
  if (input.datatype == Datatype::qdint8 && node.type == NodeType::kConv2d) {
    auto conv = DynamicConv::create(graph, node, pool);
    if (!conv) return conv.error();
    packed->dynamic_conv_ = std::move(*conv);
    packed->packed_bytes_ = packed->dynamic_conv_->packed_bytes();
    return packed;
  }
  if (input.datatype == Datatype::qdint8) {
    auto linear = DynamicLinear::create(graph, node, pool);
    if (!linear) return linear.error();
    packed->dynamic_ = std::move(*linear);
    packed->packed_bytes_ = packed->dynamic_->packed_bytes();
    return packed;
  }
  if (PatchDeconvolution::handles(graph, node)) {
    auto patch = PatchDeconvolution::create(graph, node);
    if (!patch) return patch.error();
    packed->patch_ = std::move(*patch);
    packed->packed_bytes_ = packed->patch_->packed_bytes();
    return packed;
  }
  switch (node.type) {
    case NodeType::kFullyConnected: packed->kind_ = Kind::kFullyConnected; break;
    case NodeType::kConv2d:
    case NodeType::kDepthwiseConv2d: packed->kind_ = Kind::kConvolution; break;
    case NodeType::kConvTranspose2d: packed->kind_ = Kind::kDeconvolution; break;
    default: return make_error(ErrorCode::kInternal, where + " is not a packed operator");
  }
  switch (input.datatype) {
    case Datatype::fp32: packed->arithmetic_ = Arithmetic::kF32; break;
    case Datatype::qint8:
      packed->arithmetic_ = filter.datatype == Datatype::qcint8 ? Arithmetic::kQC8 : Arithmetic::kQS8;
      break;
    case Datatype::quint8: packed->arithmetic_ = Arithmetic::kQU8; break;
    default:
      return make_error(ErrorCode::kUnsupportedOperator,
                        where + ": input datatype " + datatype_name(input.datatype) + " is not supported");
  }

  AlignedConstant filter_data(filter.constant);
  AlignedConstant bias_data(bias ? bias->constant : ByteSpan{});
  if (!filter_data.ok() || (bias && bias->constant.size && !bias_data.ok())) {
    return make_error(ErrorCode::kInternal, where + ": out of memory aligning constants");
  }
  const void* kernel = filter_data.data();
  const void* bias_pointer = bias ? bias_data.data() : nullptr;

  if (finished_keeping_nan(graph, node, handling)) {
    packed->keeps_nan_ = true;
    packed->output_min_ = node.output_min;
    packed->output_max_ = node.output_max;
    // The negated run relies on a finite bias inside the operator.
    if (bias_pointer && bias->constant.size) {
      std::vector<float> values(bias->constant.size / sizeof(float));
      std::memcpy(values.data(), bias_pointer, values.size() * sizeof(float));
      if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) {
        packed->late_bias_ = std::move(values);
        bias_pointer = nullptr;
      }
    }
  }
  const float min = packed->keeps_nan_ ? -INFINITY : node.output_min;
  const float max = packed->keeps_nan_ ? INFINITY : node.output_max;
  const int8_t min_s8 = quantized_bound_s8(min, output.quant), max_s8 = quantized_bound_s8(max, output.quant);
  const uint8_t min_u8 = quantized_bound_u8(min, output.quant), max_u8 = quantized_bound_u8(max, output.quant);
  const int8_t input_zero_s8 = static_cast<int8_t>(input.quant.zero_point);
  const int8_t output_zero_s8 = static_cast<int8_t>(output.quant.zero_point);
  const uint8_t input_zero_u8 = static_cast<uint8_t>(input.quant.zero_point);
  const uint8_t output_zero_u8 = static_cast<uint8_t>(output.quant.zero_point);
  const uint8_t kernel_zero_u8 = static_cast<uint8_t>(filter.quant.zero_point);

  xnn_operator_t op = nullptr;
  xnn_status status = xnn_status_success;
  const char* call = "";
  AllocationMeter meter;

  if (packed->kind_ == Kind::kFullyConnected) {
    const bool transposed = node.flags & 0x1;
    const size_t k = transposed ? filter.shape.dims[0] : filter.shape.dims[1];
    const size_t n = transposed ? filter.shape.dims[1] : filter.shape.dims[0];
    packed->input_channels_ = k;
    const uint32_t flags = transposed ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0;
    switch (packed->arithmetic_) {
      case Arithmetic::kF32:
        call = "xnn_create_fully_connected_nc_f32";
        status = compat::create_operator(xnn_create_fully_connected_nc_f32, &op, k, n, k, n,
                                         static_cast<const float*>(kernel), static_cast<const float*>(bias_pointer),
                                         min, max, flags);
        if (packed->keeps_nan_) packed->find_zero_weights(static_cast<const float*>(kernel), k, n, transposed);
        break;
      case Arithmetic::kQS8:
        call = "xnn_create_fully_connected_nc_qs8";
        status = compat::create_operator(xnn_create_fully_connected_nc_qs8, &op, k, n, k, n, input_zero_s8,
                                         input.quant.scale, filter.quant.scale, static_cast<const int8_t*>(kernel),
                                         static_cast<const int32_t*>(bias_pointer), output_zero_s8, output.quant.scale,
                                         min_s8, max_s8, flags);
        break;
      case Arithmetic::kQU8:
        call = "xnn_create_fully_connected_nc_qu8";
        status = compat::create_operator(xnn_create_fully_connected_nc_qu8, &op, k, n, k, n, input_zero_u8,
                                         input.quant.scale, kernel_zero_u8, filter.quant.scale,
                                         static_cast<const uint8_t*>(kernel), static_cast<const int32_t*>(bias_pointer),
                                         output_zero_u8, output.quant.scale, min_u8, max_u8, flags);
        break;
      case Arithmetic::kQC8: {
        // The 2022 release has no per-channel fully-connected operator: a
        // 1x1 convolution over [batch, 1, 1, K] computes the same thing with
        // the filter as [N, 1, 1, K]. Newer releases run it the same way, so
        // every release runs the same operator.
        ETNA_TRY(check_channel_dim(filter, transposed ? 1 : 0, where));
        std::vector<int8_t> rows;
        const int8_t* kernel_rows = static_cast<const int8_t*>(kernel);
        if (transposed) {
          rows.resize(k * n);
          for (size_t i = 0; i < k; ++i) {
            for (size_t j = 0; j < n; ++j) rows[j * k + i] = kernel_rows[i * n + j];
          }
          kernel_rows = rows.data();
        }
        packed->fully_connected_as_convolution_ = true;
        call = compat::kCreateConvolution2dNhwcQc8;
        status = compat::create_operator(compat::create_convolution2d_nhwc_qc8, &op, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, k,
                                         n, k, n, input_zero_s8, input.quant.scale, filter.quant.channel_scales.data(),
                                         kernel_rows, static_cast<const int32_t*>(bias_pointer), output_zero_s8,
                                         output.quant.scale, min_s8, max_s8, 0);
        break;
      }
    }
  } else {
    const bool depthwise = node.type == NodeType::kDepthwiseConv2d;
    // Only SAME padding (0x4) passes the checks; depthwise adds the layout flag.
    const uint32_t flags = (node.flags & 0x4) | (depthwise ? XNN_FLAG_DEPTHWISE_CONVOLUTION : 0);
    if (packed->kind_ == Kind::kConvolution) {
      switch (packed->arithmetic_) {
        case Arithmetic::kF32:
          call = "xnn_create_convolution2d_nhwc_f32";
          status =
              create_image_operator(xnn_create_convolution2d_nhwc_f32, &op, node, static_cast<const float*>(kernel),
                                    static_cast<const float*>(bias_pointer), min, max, flags);
          break;
        case Arithmetic::kQS8:
          call = "xnn_create_convolution2d_nhwc_qs8";
          status = create_image_operator(xnn_create_convolution2d_nhwc_qs8, &op, node, input_zero_s8, input.quant.scale,
                                         filter.quant.scale, static_cast<const int8_t*>(kernel),
                                         static_cast<const int32_t*>(bias_pointer), output_zero_s8, output.quant.scale,
                                         min_s8, max_s8, flags);
          break;
        case Arithmetic::kQU8:
          call = "xnn_create_convolution2d_nhwc_qu8";
          status = create_image_operator(xnn_create_convolution2d_nhwc_qu8, &op, node, input_zero_u8, input.quant.scale,
                                         kernel_zero_u8, filter.quant.scale, static_cast<const uint8_t*>(kernel),
                                         static_cast<const int32_t*>(bias_pointer), output_zero_u8, output.quant.scale,
                                         min_u8, max_u8, flags);
          break;
        case Arithmetic::kQC8: {
          ETNA_TRY(check_channel_dim(filter, depthwise ? 3 : 0, where));
          call = compat::kCreateConvolution2dNhwcQc8;
          status = create_image_operator(compat::create_convolution2d_nhwc_qc8, &op, node, input_zero_s8,
                                         input.quant.scale, filter.quant.channel_scales.data(),
                                         static_cast<const int8_t*>(kernel), static_cast<const int32_t*>(bias_pointer),
                                         output_zero_s8, output.quant.scale, min_s8, max_s8, flags);
          break;
        }
      }
    } else {
      packed->adjustment_height_ = node.adjustment_height;
      packed->adjustment_width_ = node.adjustment_width;
      switch (packed->arithmetic_) {
        case Arithmetic::kF32:
          call = "xnn_create_deconvolution2d_nhwc_f32";
          status =
              create_image_operator(xnn_create_deconvolution2d_nhwc_f32, &op, node, static_cast<const float*>(kernel),
                                    static_cast<const float*>(bias_pointer), min, max, 0);
          break;
        case Arithmetic::kQS8:
          call = "xnn_create_deconvolution2d_nhwc_qs8";
          status = create_image_operator(xnn_create_deconvolution2d_nhwc_qs8, &op, node, input_zero_s8,
                                         input.quant.scale, filter.quant.scale, static_cast<const int8_t*>(kernel),
                                         static_cast<const int32_t*>(bias_pointer), output_zero_s8, output.quant.scale,
                                         min_s8, max_s8, 0);
          break;
        case Arithmetic::kQU8:
          call = "xnn_create_deconvolution2d_nhwc_qu8";
          status = create_image_operator(xnn_create_deconvolution2d_nhwc_qu8, &op, node, input_zero_u8,
                                         input.quant.scale, kernel_zero_u8, filter.quant.scale,
                                         static_cast<const uint8_t*>(kernel), static_cast<const int32_t*>(bias_pointer),
                                         output_zero_u8, output.quant.scale, min_u8, max_u8, 0);
          break;
        case Arithmetic::kQC8:
          return make_error(ErrorCode::kUnsupportedOperator,
                            where + ": per-channel quantized filters are not supported for transposed convolution");
      }
    }
  }
  packed->op_.reset(op);
  if (status != xnn_status_success) return xnnpack_error(where, call, status, ErrorCode::kInvalidProgram);
  packed->packed_bytes_ =
      AllocationMeter::available() ? meter.bytes() : filter.constant.size + (bias ? bias->constant.size : 0);
  return packed;
}

Status PackedOperator::run(const Node& node, const Shape& input_shape, const void* input, const Shape& output_shape,
                           void* output, pthreadpool_t threadpool) {
  // etna kernels keep no per-call state in the object: no turns needed.
  if (dynamic_) return dynamic_->run(node, input_shape, input, static_cast<float*>(output), threadpool);
  if (dynamic_conv_) return dynamic_conv_->run(node, input_shape, input, static_cast<float*>(output), threadpool);
  if (patch_) {
    patch_->run(input_shape, static_cast<const float*>(input), static_cast<float*>(output), threadpool);
    return Status::ok();
  }
  const bool as_convolution = kind_ == Kind::kConvolution || fully_connected_as_convolution_;
  if (arithmetic_ == Arithmetic::kQC8 && !as_convolution) {
    return make_error(ErrorCode::kInternal, node.describe() + ": per-channel int8 outside a convolution");
  }
  compat::ImageSize size;
  if (kind_ == Kind::kFullyConnected) {
    size.batch = input_channels_ ? input_shape.numel() / input_channels_ : 0;
  } else {
    size.batch = input_shape.dims[0];
    size.height = input_shape.dims[1];
    size.width = input_shape.dims[2];
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  const compat::Outcome outcome = run_operator(size, input, output, threadpool);
  if (outcome.status != xnn_status_success) return xnnpack_error(node.describe(), outcome.call, outcome.status);
  if (!keeps_nan_) return Status::ok();
  return finish_keeping_nan(node, size, input_shape, input, output_shape, static_cast<float*>(output), threadpool);
}

Status PackedOperator::finish_keeping_nan(const Node& node, const compat::ImageSize& size, const Shape& input_shape,
                                          const void* input, const Shape& output_shape, float* output,
                                          pthreadpool_t threadpool) {
  const size_t count = output_shape.numel();
  // Unbounded, the kernel's clamp still turns NaN into an infinity (whichever
  // bound it applies first), so only infinite outputs can be NaN. Negating
  // the input negates every product exactly and the bias is finite, so a true
  // infinity comes out with the other sign while a NaN comes out the same.
  auto infinite = [](float v) { return std::fabs(v) == INFINITY; };
  if (std::any_of(output, output + count, infinite)) {
    const size_t input_count = input_shape.numel();
    std::vector<float> negated(input_count), mirror(count);
    const auto* in = static_cast<const float*>(input);
    for (size_t i = 0; i < input_count; ++i) negated[i] = -in[i];
    const compat::Outcome again = run_operator(size, negated.data(), mirror.data(), threadpool);
    if (again.status != xnn_status_success) return xnnpack_error(node.describe(), again.call, again.status);
    for (size_t i = 0; i < count; ++i) {
      if (infinite(output[i]) && !(mirror[i] == -output[i])) output[i] = NAN;
    }
  }
  const size_t channels = output_shape.rank ? output_shape.dims[output_shape.rank - 1] : 1;
  if (kind_ == Kind::kFullyConnected && !fully_connected_as_convolution_) {
    mark_fully_connected_nan(static_cast<const float*>(input), size.batch, channels, output);
  }
  if (!late_bias_.empty() && channels == late_bias_.size()) {
    for (size_t i = 0; i < count; ++i) output[i] += late_bias_[i % channels];
  }
  if (has_finite_bound(output_min_, output_max_)) clamp_keeping_nan(output, count, output_min_, output_max_);
  return Status::ok();
}

void PackedOperator::find_zero_weights(const float* filter, size_t k, size_t n, bool transposed) {
  zero_weight_starts_.assign(k + 1, 0);
  zero_weight_channels_.clear();
  for (size_t i = 0; i < k; ++i) {
    for (size_t o = 0; o < n; ++o) {
      if (filter[transposed ? i * n + o : o * k + i] == 0.0f) zero_weight_channels_.push_back(static_cast<uint32_t>(o));
    }
    zero_weight_starts_[i + 1] = zero_weight_channels_.size();
  }
}

void PackedOperator::mark_fully_connected_nan(const float* input, size_t rows, size_t channels, float* output) const {
  const size_t k = input_channels_;
  if (zero_weight_starts_.size() != k + 1) return;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = input + r * k;
    float* y = output + r * channels;
    if (std::all_of(x, x + k, [](float v) { return std::isfinite(v); })) continue;
    if (std::any_of(x, x + k, [](float v) { return std::isnan(v); })) {
      std::fill(y, y + channels, NAN);
      continue;
    }
    for (size_t i = 0; i < k; ++i) {
      if (std::isfinite(x[i])) continue;
      for (size_t z = zero_weight_starts_[i]; z < zero_weight_starts_[i + 1]; ++z) y[zero_weight_channels_[z]] = NAN;
    }
  }
}

compat::Outcome PackedOperator::run_operator(const compat::ImageSize& size, const void* input, void* output,
                                             pthreadpool_t threadpool) {
  const bool as_convolution = kind_ == Kind::kConvolution || fully_connected_as_convolution_;
  xnn_operator_t op = op_.get();
  const auto* in_f32 = static_cast<const float*>(input);
  const auto* in_s8 = static_cast<const int8_t*>(input);
  const auto* in_u8 = static_cast<const uint8_t*>(input);
  auto* out_f32 = static_cast<float*>(output);
  auto* out_s8 = static_cast<int8_t*>(output);
  auto* out_u8 = static_cast<uint8_t*>(output);
  if (as_convolution) {
    switch (arithmetic_) {
      case Arithmetic::kF32: return compat::run_convolution(op, size, in_f32, out_f32, threadpool);
      case Arithmetic::kQS8: return compat::run_convolution(op, size, in_s8, out_s8, threadpool);
      case Arithmetic::kQU8: return compat::run_convolution(op, size, in_u8, out_u8, threadpool);
      case Arithmetic::kQC8: return compat::run_convolution_qc8(op, size, in_s8, out_s8, threadpool);
    }
  }
  const compat::Adjustment adjustment{adjustment_height_, adjustment_width_};
  const bool fully_connected = kind_ == Kind::kFullyConnected;
  switch (arithmetic_) {
    case Arithmetic::kF32:
      return fully_connected ? compat::run_fully_connected(op, size.batch, in_f32, out_f32, threadpool)
                             : compat::run_deconvolution(op, size, adjustment, in_f32, out_f32, threadpool);
    case Arithmetic::kQS8:
      return fully_connected ? compat::run_fully_connected(op, size.batch, in_s8, out_s8, threadpool)
                             : compat::run_deconvolution(op, size, adjustment, in_s8, out_s8, threadpool);
    case Arithmetic::kQU8:
      return fully_connected ? compat::run_fully_connected(op, size.batch, in_u8, out_u8, threadpool)
                             : compat::run_deconvolution(op, size, adjustment, in_u8, out_u8, threadpool);
    case Arithmetic::kQC8: break;  // refused in run()
  }
  return {xnn_status_invalid_state, "PackedOperator::run"};
}

}  // namespace etna::xnn
