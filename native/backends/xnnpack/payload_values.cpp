#include "backends/xnnpack/payload_internal.h"

#include <cmath>
#include <cstring>

#include "backends/xnnpack/sha256.h"
#include "core/bf16.h"

namespace etna::xnn::payload_detail {
namespace {

// Largest tensor we accept; keeps every byte count far from size_t overflow.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 46;

// Upstream rounds fp32 block scales to bf16 by scaling up by 1 + 2^-8 and
// truncating; doing the same keeps results identical to it.
uint16_t float_to_bf16_like_upstream(float value) { return truncate_to_bfloat16(value * 1.00389105f); }

// PerChannelGroupQuant: [out, in] weights, one bf16 scale per output channel
// and block of group_size input channels, from scale_bf16, from a constant
// buffer of bf16 (scale_buffer_idx, num_scales), or from fp32 `scale`.
Status read_block_scales(const fbx::PerChannelGroupQuant& params, Value& value, const ConstantResolver& constants,
                         const std::string& where) {
  Quantization& quant = value.quant;
  if (value.shape.rank != 2) {
    return invalid(where + ": per-group quantization needs a 2-d [out, in] tensor, has shape " +
                   value.shape.to_string());
  }
  if (params.channel_dim() != 0) {
    return make_error(ErrorCode::kUnsupportedOperator, where + ": per-group quantization along dim " +
                                                           std::to_string(params.channel_dim()) +
                                                           "; only dim 0 (output channels) is supported");
  }
  const size_t out = value.shape.dims[0];
  const size_t in = value.shape.dims[1];
  if (params.group_size() <= 0 || in % static_cast<size_t>(params.group_size()) != 0) {
    return invalid(where + ": group_size " + std::to_string(params.group_size()) + " does not divide the " +
                   std::to_string(in) + " input channels");
  }
  quant.kind = Quantization::Kind::kBlockwise;
  quant.channel_dim = 0;
  quant.block_size = static_cast<size_t>(params.group_size());
  const size_t expected = out * (in / quant.block_size);
  std::vector<uint16_t> bf16;
  if (params.scale_bf16()) {
    bf16.assign(params.scale_bf16()->begin(), params.scale_bf16()->end());
  } else if (params.scale_buffer_idx() != 0) {
    auto bytes = constants.resolve(params.scale_buffer_idx(), where + " scale_buffer_idx", nullptr);
    if (!bytes) return bytes.error();
    if (params.num_scales() != expected || bytes->size / 2 < expected) {
      return invalid(where + ": " + std::to_string(expected) + " blocks need as many bf16 scales, buffer has " +
                     std::to_string(bytes->size / 2) + " (num_scales " + std::to_string(params.num_scales()) + ")");
    }
    bf16.resize(expected);
    for (size_t i = 0; i < expected; ++i) bf16[i] = read_u16(bytes->data + 2 * i);
  } else if (params.scale()) {
    for (float scale : *params.scale()) bf16.push_back(float_to_bf16_like_upstream(scale));
  }
  if (bf16.size() != expected) {
    return invalid(where + ": " + std::to_string(out) + " channels in blocks of " + std::to_string(quant.block_size) +
                   " need " + std::to_string(expected) + " scales, found " + std::to_string(bf16.size()));
  }
  std::vector<float> scales(expected);
  for (size_t i = 0; i < expected; ++i) {
    const float scale = bfloat16_to_float(bf16[i]);
    if (!std::isfinite(scale) || scale <= 0) {
      return invalid(where + ": block scale " + std::to_string(scale) + " is not a positive number");
    }
    scales[i] = scale;
  }
  quant.channel_scales = ScaleList(std::move(scales));
  return Status::ok();
}

Status read_quantization(const fbx::QuantizedTensorValue& quantized, Value& value, const ConstantResolver& constants,
                         const std::string& where) {
  Quantization& quant = value.quant;
  switch (quantized.quant_params_type()) {
    case fbx::QuantParams::PerTensorQuant: {
      const auto* params = quantized.quant_params_as_PerTensorQuant();
      if (!params) return invalid(where + ": PerTensorQuant table missing");
      quant.kind = Quantization::Kind::kPerTensor;
      quant.scale = params->scale();
      quant.zero_point = params->zero_point();
      if (!std::isfinite(quant.scale) || quant.scale <= 0) {
        return invalid(where + ": quantization scale " + std::to_string(quant.scale) + " is not a positive number");
      }
      return Status::ok();
    }
    case fbx::QuantParams::PerChannelQuant: {
      const auto* params = quantized.quant_params_as_PerChannelQuant();
      if (!params) return invalid(where + ": PerChannelQuant table missing");
      quant.kind = Quantization::Kind::kPerChannel;
      if (params->channel_dim() < 0 || static_cast<size_t>(params->channel_dim()) >= value.shape.rank) {
        return invalid(where + ": channel_dim " + std::to_string(params->channel_dim()) + " is outside rank " +
                       std::to_string(value.shape.rank));
      }
      quant.channel_dim = static_cast<size_t>(params->channel_dim());
      const size_t channels = value.shape.dims[quant.channel_dim];
      if (params->scale_buffer_idx() != 0) {
        auto bytes = constants.resolve(params->scale_buffer_idx(), where + " scale_buffer_idx", nullptr);
        if (!bytes) return bytes.error();
        if (params->num_scales() != channels || bytes->size / sizeof(float) < channels) {
          return invalid(where + ": " + std::to_string(channels) + " channels need as many fp32 scales, buffer has " +
                         std::to_string(bytes->size / sizeof(float)) + " (num_scales " +
                         std::to_string(params->num_scales()) + ")");
        }
        std::vector<float> scales(channels);
        if (channels) std::memcpy(scales.data(), bytes->data, channels * sizeof(float));
        quant.channel_scales = ScaleList(std::move(scales));
      } else {
        const auto* inline_scales = params->scale();
        const size_t count = inline_scales ? inline_scales->size() : 0;
        if (count != channels) {
          return invalid(where + ": " + std::to_string(channels) + " channels but " + std::to_string(count) +
                         " inline scales");
        }
        quant.channel_scales = ScaleList(std::vector<float>(inline_scales->begin(), inline_scales->end()));
      }
      for (float scale : quant.channel_scales) {
        if (!std::isfinite(scale) || scale <= 0) {
          return invalid(where + ": per-channel scale " + std::to_string(scale) + " is not a positive number");
        }
      }
      return Status::ok();
    }
    case fbx::QuantParams::PerTokenDynamicQuant: {
      const auto* params = quantized.quant_params_as_PerTokenDynamicQuant();
      if (!params) return invalid(where + ": PerTokenDynamicQuant table missing");
      // One scale and zero point per num_nonbatch_dims trailing dims; which
      // count a consumer needs is checked with the consumer (graph_checks.cpp).
      if (value.shape.rank == 0) return invalid(where + ": a per-token quantized value needs at least one dim");
      const int32_t nonbatch = params->num_nonbatch_dims();
      if (nonbatch < 1 || static_cast<size_t>(nonbatch) > value.shape.rank) {
        return invalid(where + ": num_nonbatch_dims " + std::to_string(nonbatch) + " is not between 1 and the rank " +
                       std::to_string(value.shape.rank));
      }
      quant.kind = Quantization::Kind::kPerToken;
      quant.nonbatch_dims = static_cast<size_t>(nonbatch);
      return Status::ok();
    }
    case fbx::QuantParams::PerChannelGroupQuant: {
      const auto* params = quantized.quant_params_as_PerChannelGroupQuant();
      if (!params) return invalid(where + ": PerChannelGroupQuant table missing");
      return read_block_scales(*params, value, constants, where);
    }
    default:
      return invalid(where + ": unknown quantization type code " +
                     std::to_string(static_cast<int>(quantized.quant_params_type())));
  }
}

}  // namespace

Status read_value(size_t entry, const fbx::Value& serialized, const ConstantResolver& constants, Value& value) {
  const std::string where = "value entry " + std::to_string(entry);
  const fbx::TensorValue* tensor = nullptr;
  const fbx::QuantizedTensorValue* quantized = nullptr;
  switch (serialized.value_type()) {
    case fbx::ValueUnion::TensorValue: tensor = serialized.value_as_TensorValue(); break;
    case fbx::ValueUnion::QuantizedTensorValue:
      quantized = serialized.value_as_QuantizedTensorValue();
      tensor = quantized ? quantized->tensor_value() : nullptr;
      break;
    case fbx::ValueUnion::NONE: return invalid(where + " has no tensor (value type NONE)");
    default:
      return make_error(ErrorCode::kUnsupportedOperator, where + " has unknown value type code " +
                                                             std::to_string(static_cast<int>(serialized.value_type())));
  }
  if (!tensor) return invalid(where + " has no tensor table");

  value.id = tensor->id_out();
  const std::string named = where + " (id " + std::to_string(value.id) + ")";
  if (value.id == kInvalidId) return invalid(where + " uses the reserved id 0xFFFFFFFF");
  const int16_t datatype_code = static_cast<int16_t>(tensor->datatype());
  if (datatype_code < 0 || datatype_code > static_cast<int16_t>(Datatype::MAX)) {
    return make_error(ErrorCode::kUnsupportedOperator,
                      named + " has unknown datatype code " + std::to_string(datatype_code));
  }
  value.datatype = tensor->datatype();
  if (tensor->dq_datatype() != Datatype::invalid) {
    return make_error(ErrorCode::kUnsupportedOperator, named + " uses legacy dynamic quantization (dq_datatype " +
                                                           datatype_name(tensor->dq_datatype()) +
                                                           "), which the linked XNNPACK cannot run");
  }

  // Upstream passes num_dims with the dims array, so num_dims may not exceed it.
  const uint32_t num_dims = tensor->num_dims();
  const size_t dims_count = tensor->dims() ? tensor->dims()->size() : 0;
  if (num_dims > dims_count) {
    return invalid(named + " declares " + std::to_string(num_dims) + " dims but lists " + std::to_string(dims_count));
  }
  if (num_dims > kMaxRank) {
    return make_error(ErrorCode::kUnsupportedOperator, named + " has rank " + std::to_string(num_dims) +
                                                           "; XNNPACK supports up to " + std::to_string(kMaxRank));
  }
  value.shape.rank = num_dims;
  uint64_t elements = 1;
  for (uint32_t i = 0; i < num_dims; ++i) {
    value.shape.dims[i] = tensor->dims()->Get(i);
    if (__builtin_mul_overflow(elements, uint64_t{value.shape.dims[i]}, &elements) || elements > kMaxTensorBytes) {
      return invalid(named + " has shape " + value.shape.to_string() + ", too large");
    }
  }
  const size_t element_size = datatype_size(value.datatype);
  const uint64_t stored_bytes = constant_bytes(value.datatype, value.shape);
  if (stored_bytes > kMaxTensorBytes) {
    return invalid(named + " has shape " + value.shape.to_string() + ", too large");
  }

  const uint32_t flags = tensor->flags();
  if (flags & ~uint32_t{3}) {
    return invalid(named + " has flags " + hex32(flags) + "; only 0x1 (input) and 0x2 (output) are allowed");
  }
  if (flags == 3) return invalid(named + " is flagged both external input and external output");
  value.is_input = flags & 1;
  value.is_output = flags & 2;
  if (value.is_input || value.is_output) value.external_id = tensor->external_id();

  if (quantized) ETNA_TRY(read_quantization(*quantized, value, constants, named));

  if (tensor->constant_buffer_idx() != 0) {
    if (value.is_input || value.is_output) return invalid(named + " is both a constant and an external value");
    std::string key;
    auto bytes = constants.resolve(tensor->constant_buffer_idx(), named, &key);
    if (!bytes) return bytes.error();
    const uint64_t needed = stored_bytes;
    if (bytes->size < needed) {
      return invalid(named + " needs " + std::to_string(needed) + " constant bytes for " +
                     datatype_name(value.datatype) + value.shape.to_string() + ", its buffer has " +
                     std::to_string(bytes->size));
    }
    value.is_constant = true;
    // Only the bytes the tensor covers take part in its identity.
    const bool sized = element_size || is_four_bit(value.datatype);
    value.constant = sized ? ByteSpan{bytes->data, static_cast<size_t>(needed)} : *bytes;
    value.constant_key = key.empty() ? "sha256:" + sha256_hex(value.constant.data, value.constant.size) : "name:" + key;
  }
  return Status::ok();
}

}  // namespace etna::xnn::payload_detail
