#include "backends/xnnpack/payload.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "backends/xnnpack/node_types.h"
#include "backends/xnnpack/sha256.h"

namespace etna::xnn {
namespace {

namespace fbx = ::etna::xnnpack;

constexpr size_t kHeaderBytes = 30;
// Largest tensor we accept; keeps every byte count far from size_t overflow.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 46;

Error invalid(std::string message) { return make_error(ErrorCode::kInvalidProgram, std::move(message)); }

uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
uint64_t read_u64(const uint8_t* p) { return uint64_t{read_u32(p)} | (uint64_t{read_u32(p + 4)} << 32); }

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", v);
  return text;
}

// Resolves constant buffer indices to bytes (spec section 4).
class ConstantResolver {
 public:
  ConstantResolver(const PayloadLayout& layout, const fbx::Graph& graph, const NamedDataLookup& named_data)
      : layout_(layout), graph_(graph), named_data_(named_data) {}

  // `what` names the referring field for messages.
  Result<ByteSpan> resolve(uint32_t index, const std::string& what, std::string* named_key) const {
    if (layout_.has_header) {
      const auto* table = graph_.constant_data();
      if (!table || index >= table->size()) {
        return invalid(what + " refers to constant_data[" + std::to_string(index) + "] but the table has " +
                       std::to_string(table ? table->size() : 0) + " entries");
      }
      const fbx::ConstantDataOffset* entry = table->Get(index);
      // An empty key counts as absent: old writers emit "" beside offset-based entries.
      if (entry->named_key() && entry->named_key()->size() > 0) {
        std::string_view key(entry->named_key()->c_str(), entry->named_key()->size());
        std::optional<ByteSpan> bytes = named_data_ ? named_data_(key) : std::nullopt;
        if (!bytes) {
          return invalid(what + " names constant '" + std::string(key) + "' that the program's named data lacks");
        }
        if (named_key) *named_key = std::string(key);
        return *bytes;
      }
      const uint64_t offset = entry->offset();
      const uint64_t size = entry->size();
      if (offset > layout_.constant_region.size || size > layout_.constant_region.size - offset) {
        return invalid(what + " spans bytes [" + std::to_string(offset) + ", +" + std::to_string(size) +
                       ") outside the " + std::to_string(layout_.constant_region.size) + "-byte constant region");
      }
      return ByteSpan{layout_.constant_region.data + offset, static_cast<size_t>(size)};
    }
    const auto* buffers = graph_.constant_buffer();
    if (!buffers || index >= buffers->size()) {
      return invalid(what + " refers to constant_buffer[" + std::to_string(index) + "] but the payload has " +
                     std::to_string(buffers ? buffers->size() : 0) + " buffers");
    }
    const auto* storage = buffers->Get(index)->storage();
    if (!storage) return ByteSpan{};
    return ByteSpan{storage->data(), storage->size()};
  }

 private:
  const PayloadLayout& layout_;
  const fbx::Graph& graph_;
  const NamedDataLookup& named_data_;
};

// bf16 is the high half of an fp32.
float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Upstream rounds fp32 block scales to bf16 by scaling up by 1 + 2^-8 and
// truncating; doing the same keeps results identical to it.
uint16_t float_to_bf16_like_upstream(float value) {
  const float adjusted = value * 1.00389105f;
  uint32_t bits;
  std::memcpy(&bits, &adjusted, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

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
    return make_error(ErrorCode::kUnsupportedOperator,
                      where + ": per-group quantization along dim " + std::to_string(params.channel_dim()) +
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
  quant.channel_scales.resize(expected);
  for (size_t i = 0; i < expected; ++i) {
    const float scale = bf16_to_float(bf16[i]);
    if (!std::isfinite(scale) || scale <= 0) {
      return invalid(where + ": block scale " + std::to_string(scale) + " is not a positive number");
    }
    quant.channel_scales[i] = scale;
  }
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
        quant.channel_scales.resize(channels);
        if (channels) std::memcpy(quant.channel_scales.data(), bytes->data, channels * sizeof(float));
      } else {
        const auto* inline_scales = params->scale();
        const size_t count = inline_scales ? inline_scales->size() : 0;
        if (count != channels) {
          return invalid(where + ": " + std::to_string(channels) + " channels but " + std::to_string(count) +
                         " inline scales");
        }
        quant.channel_scales.assign(inline_scales->begin(), inline_scales->end());
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

Status read_value(size_t entry, const fbx::Value& serialized, const ConstantResolver& constants, Value& value) {
  const std::string where = "value entry " + std::to_string(entry);
  const fbx::TensorValue* tensor = nullptr;
  const fbx::QuantizedTensorValue* quantized = nullptr;
  switch (serialized.value_type()) {
    case fbx::ValueUnion::TensorValue:
      tensor = serialized.value_as_TensorValue();
      break;
    case fbx::ValueUnion::QuantizedTensorValue:
      quantized = serialized.value_as_QuantizedTensorValue();
      tensor = quantized ? quantized->tensor_value() : nullptr;
      break;
    case fbx::ValueUnion::NONE:
      return invalid(where + " has no tensor (value type NONE)");
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

template <typename T>
std::vector<size_t> to_sizes(const flatbuffers::Vector<T>* list) {
  std::vector<size_t> out;
  if (list) out.assign(list->begin(), list->end());
  return out;
}

// Convolution and pooling tables share the padding field names.
template <typename Table>
void read_padding(const Table& t, Node& node) {
  node.padding_top = t.padding_top();
  node.padding_right = t.padding_right();
  node.padding_bottom = t.padding_bottom();
  node.padding_left = t.padding_left();
}

template <typename Table>
void read_convolution(const Table& t, Node& node) {
  read_padding(t, node);
  node.kernel_height = t.kernel_height();
  node.kernel_width = t.kernel_width();
  node.stride_height = t.subsampling_height();
  node.stride_width = t.subsampling_width();
  node.dilation_height = t.dilation_height();
  node.dilation_width = t.dilation_width();
  node.group_input_channels = t.group_input_channels();
  node.group_output_channels = t.group_output_channels();
  node.groups = t.groups();
  node.adjustment_height = t.adjustment_height();
  node.adjustment_width = t.adjustment_width();
}

// Padding and window of a pooling node (Pooling2d or ArgMaxPooling2d).
template <typename Table>
void read_pooling_window(const Table& t, Node& node) {
  read_padding(t, node);
  node.kernel_height = t.pooling_height();
  node.kernel_width = t.pooling_width();
}


// Input and output ids, then flags, of the tables with `input_id`/`output_id`.
template <typename Table>
Status read_single_io(const Table& t, NodeReader& reader, Node& node) {
  ETNA_TRY(reader.input(t.input_id(), "input_id"));
  ETNA_TRY(reader.output(t.output_id(), "output_id"));
  node.flags = t.flags();
  return Status::ok();
}

// Input, filter, optional bias and output of FC and convolution tables.
template <typename Table>
Status read_weighted_io(const Table& t, NodeReader& reader, Node& node) {
  ETNA_TRY(reader.input(t.input1_id(), "input1_id"));
  ETNA_TRY(reader.input(t.filter_id(), "filter_id"));
  ETNA_TRY(reader.input(t.bias_id(), "bias_id", true));
  ETNA_TRY(reader.output(t.output_id(), "output_id"));
  node.flags = t.flags();
  return Status::ok();
}

}  // namespace

Status NodeReader::input(uint32_t id, const char* field, bool optional) {
  auto index = resolve(id, field, optional);
  if (!index) return index.error();
  node_.inputs.push_back(*index);
  return Status::ok();
}

Status NodeReader::output(uint32_t id, const char* field) {
  auto index = resolve(id, field, false);
  if (!index) return index.error();
  node_.outputs.push_back(*index);
  return Status::ok();
}

Result<uint32_t> NodeReader::resolve(uint32_t id, const char* field, bool optional) {
  if (id == kInvalidId) {
    if (optional) return kNoValue;
    return invalid(node_.describe() + ": " + field + " is absent (0xFFFFFFFF) but required");
  }
  auto it = index_of_id_.find(id);
  if (it == index_of_id_.end()) {
    return invalid(node_.describe() + ": " + field + " " + std::to_string(id) + " names no value");
  }
  return it->second;
}

Status read_binary_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Binary*>(table);
  ETNA_TRY(reader.input(t.input1_id(), "input1_id"));
  ETNA_TRY(reader.input(t.input2_id(), "input2_id"));
  ETNA_TRY(reader.output(t.output_id(), "output_id"));
  node.flags = t.flags();
  return Status::ok();
}

Status read_unary_node(const void* table, NodeReader& reader, Node& node) {
  return read_single_io(*static_cast<const fbx::Unary*>(table), reader, node);
}

Status read_fully_connected_node(const void* table, NodeReader& reader, Node& node) {
  return read_weighted_io(*static_cast<const fbx::FullyConnected*>(table), reader, node);
}

Status read_convolution_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Convolution*>(table);
  read_convolution(t, node);
  return read_weighted_io(t, reader, node);
}

Status read_pooling_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Pooling2d*>(table);
  read_pooling_window(t, node);
  node.stride_height = t.stride_height();
  node.stride_width = t.stride_width();
  node.dilation_height = t.dilation_height();
  node.dilation_width = t.dilation_width();
  return read_single_io(t, reader, node);
}

Status read_argmax_pooling_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::ArgMaxPooling2d*>(table);
  read_pooling_window(t, node);
  ETNA_TRY(reader.input(t.input_id(), "input_id"));
  ETNA_TRY(reader.output(t.output_value_id(), "output_value_id"));
  ETNA_TRY(reader.output(t.output_index_id(), "output_index_id"));
  node.flags = t.flags();
  return Status::ok();
}

Status read_transpose_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticTranspose*>(table);
  node.list1 = to_sizes(t.perm());
  if (t.num_dims() != node.list1.size()) {
    return invalid(node.describe() + ": num_dims " + std::to_string(t.num_dims()) + " but perm has " +
                   std::to_string(node.list1.size()) + " entries");
  }
  return read_single_io(t, reader, node);
}

Status read_resize_bilinear_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticResizeBilinear2d*>(table);
  node.new_height = t.new_height();
  node.new_width = t.new_width();
  return read_single_io(t, reader, node);
}

Status read_constant_pad_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticConstantPad*>(table);
  node.list1 = to_sizes(t.pre_paddings());
  node.list2 = to_sizes(t.post_paddings());
  node.scalar = t.padding_value();
  return read_single_io(t, reader, node);
}

Status read_reshape_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticReshape*>(table);
  node.list1 = to_sizes(t.new_shape());
  return read_single_io(t, reader, node);
}

Status read_slice_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticSlice*>(table);
  node.list1 = to_sizes(t.offsets());
  node.list2 = to_sizes(t.sizes());
  return read_single_io(t, reader, node);
}

Status read_concatenate_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Concatenate*>(table);
  // The type's row says how many of the five input fields are used.
  const int count = node_type_info(node.type).inputs;
  node.axis = t.axis();
  const uint32_t ids[5] = {t.input1_id(), t.input2_id(), t.input3_id(), t.input4_id(), t.input5_id()};
  const char* fields[5] = {"input1_id", "input2_id", "input3_id", "input4_id", "input5_id"};
  for (int i = 0; i < count && i < 5; ++i) ETNA_TRY(reader.input(ids[i], fields[i]));
  ETNA_TRY(reader.output(t.output_id(), "output_id"));
  node.flags = t.flags();
  return Status::ok();
}

Status read_leaky_relu_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::LeakyRelu*>(table);
  node.scalar = t.negative_slope();
  return read_single_io(t, reader, node);
}

Status read_elu_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Elu*>(table);
  node.scalar = t.alpha();
  return read_single_io(t, reader, node);
}

Status read_attention_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::ScaledDotProductAttention*>(table);
  ETNA_TRY(reader.input(t.query_id(), "query_id"));
  ETNA_TRY(reader.input(t.key_id(), "key_id"));
  ETNA_TRY(reader.input(t.value_id(), "value_id"));
  ETNA_TRY(reader.input(t.scale_id(), "scale_id"));
  ETNA_TRY(reader.input(t.mask_id(), "mask_id", true));
  ETNA_TRY(reader.output(t.output_id(), "output_id"));
  node.flags = t.flags();
  return Status::ok();
}

Result<PayloadLayout> split_payload(ByteSpan payload) {
  PayloadLayout layout;
  if (!payload.data || payload.size < 8) {
    return invalid("XNNPACK payload is " + std::to_string(payload.size) + " bytes, too small to hold a graph");
  }
  if (std::memcmp(payload.data + 4, "XH00", 4) == 0) {
    if (payload.size < kHeaderBytes) {
      return invalid("XNNPACK payload is " + std::to_string(payload.size) + " bytes, shorter than its " +
                     std::to_string(kHeaderBytes) + "-byte XH00 header");
    }
    const uint16_t header_length = read_u16(payload.data + 8);
    const uint64_t flatbuffer_offset = read_u32(payload.data + 10);
    const uint64_t flatbuffer_size = read_u32(payload.data + 14);
    const uint64_t constant_offset = read_u32(payload.data + 18);
    const uint64_t constant_size = read_u64(payload.data + 22);
    // Longer headers are newer ones with fields appended; shorter ones cannot hold ours.
    if (header_length < kHeaderBytes) {
      return invalid("XH00 header_length " + std::to_string(header_length) + " is shorter than " +
                     std::to_string(kHeaderBytes) + " bytes");
    }
    if (flatbuffer_size < 8) {
      return invalid("XH00 flatbuffer_size " + std::to_string(flatbuffer_size) + " is below the 8-byte minimum");
    }
    if (flatbuffer_offset > payload.size || flatbuffer_size > payload.size - flatbuffer_offset) {
      return invalid("XH00 graph bytes [" + std::to_string(flatbuffer_offset) + ", +" +
                     std::to_string(flatbuffer_size) + ") exceed the " + std::to_string(payload.size) +
                     "-byte payload");
    }
    if (constant_offset > payload.size || constant_size > payload.size - constant_offset) {
      return invalid("XH00 constant bytes [" + std::to_string(constant_offset) + ", +" + std::to_string(constant_size) +
                     ") exceed the " + std::to_string(payload.size) + "-byte payload");
    }
    if (constant_offset < flatbuffer_offset + flatbuffer_size) {
      return invalid("XH00 constant region at " + std::to_string(constant_offset) + " overlaps the graph ending at " +
                     std::to_string(flatbuffer_offset + flatbuffer_size));
    }
    layout.has_header = true;
    layout.flatbuffer = ByteSpan{payload.data + flatbuffer_offset, static_cast<size_t>(flatbuffer_size)};
    layout.constant_region = ByteSpan{payload.data + constant_offset, static_cast<size_t>(constant_size)};
  } else {
    layout.flatbuffer = payload;
  }
  const uint8_t* identifier = layout.flatbuffer.data + 4;
  if (std::memcmp(identifier, "XN00", 4) != 0 && std::memcmp(identifier, "XN01", 4) != 0) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      const char c = static_cast<char>(identifier[i]);
      shown += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "\\x" + hex32(identifier[i]).substr(2);
    }
    return invalid("XNNPACK graph identifier is '" + shown + "', expected 'XN00' or 'XN01'");
  }
  return layout;
}

Result<ParsedPayload> parse_payload(ByteSpan payload, const NamedDataLookup& named_data) {
  auto layout_result = split_payload(payload);
  if (!layout_result) return layout_result.error();
  PayloadLayout layout = *layout_result;

  ParsedPayload parsed;
  // The verifier and generated accessors expect the buffer at an aligned address.
  if (reinterpret_cast<uintptr_t>(layout.flatbuffer.data) % 16 != 0) {
    auto copy = copy_bytes(layout.flatbuffer.data, layout.flatbuffer.size);
    if (!copy) return copy.error();
    parsed.flatbuffer_copy = std::shared_ptr<ByteSource>(std::move(*copy));
    layout.flatbuffer = parsed.flatbuffer_copy->span();
  }
  flatbuffers::Verifier verifier(layout.flatbuffer.data, layout.flatbuffer.size);
  if (!verifier.VerifyBuffer<fbx::Graph>(nullptr)) {
    return invalid("XNNPACK graph (" + std::to_string(layout.flatbuffer.size) +
                   " bytes) fails FlatBuffers verification");
  }
  const fbx::Graph& serialized = *flatbuffers::GetRoot<fbx::Graph>(layout.flatbuffer.data);
  Graph& graph = parsed.graph;

  graph.num_externs = serialized.num_externs();
  if (graph.num_externs > kMaxExterns) {
    return invalid("XNNPACK graph has num_externs " + std::to_string(graph.num_externs) + ", above the limit of " +
                   std::to_string(kMaxExterns));
  }

  ConstantResolver constants(layout, serialized, named_data);
  std::unordered_map<uint32_t, uint32_t> index_of_id;
  std::unordered_set<uint32_t> external_ids;
  const auto* values = serialized.values();
  const size_t value_count = values ? values->size() : 0;
  graph.values.resize(value_count);
  for (size_t i = 0; i < value_count; ++i) {
    Value& value = graph.values[i];
    ETNA_TRY(read_value(i, *values->Get(static_cast<flatbuffers::uoffset_t>(i)), constants, value));
    if (!index_of_id.emplace(value.id, static_cast<uint32_t>(i)).second) {
      return invalid("value entry " + std::to_string(i) + " reuses id " + std::to_string(value.id));
    }
    if (value.is_input || value.is_output) {
      if (value.external_id >= graph.num_externs) {
        return invalid("value " + std::to_string(value.id) + " has external_id " + std::to_string(value.external_id) +
                       " but the graph has " + std::to_string(graph.num_externs) + " external values");
      }
      if (!external_ids.insert(value.external_id).second) {
        return invalid("value " + std::to_string(value.id) + " reuses external_id " +
                       std::to_string(value.external_id));
      }
      (value.is_input ? graph.inputs : graph.outputs).push_back(static_cast<uint32_t>(i));
    }
  }

  const auto* nodes = serialized.nodes();
  const size_t node_count = nodes ? nodes->size() : 0;
  graph.nodes.resize(node_count);
  for (size_t i = 0; i < node_count; ++i) {
    const fbx::Node& entry = *nodes->Get(static_cast<flatbuffers::uoffset_t>(i));
    Node& node = graph.nodes[i];
    node.index = i;
    const uint8_t code = static_cast<uint8_t>(entry.node_type());
    if (code == 0) return invalid("node " + std::to_string(i) + " has no operation (type NONE)");
    if (code > kLastNodeType) {
      return make_error(ErrorCode::kUnsupportedOperator,
                        "node " + std::to_string(i) + " has unknown node type code " + std::to_string(code));
    }
    node.type = static_cast<NodeType>(code);
    node.output_min = -std::numeric_limits<float>::infinity();
    node.output_max = std::numeric_limits<float>::infinity();
    if (const auto* bounds = entry.output_min_max()) {
      node.output_min = bounds->output_min();
      node.output_max = bounds->output_max();
      if (!(node.output_min <= node.output_max)) {
        return invalid(node.describe() + ": output_min " + std::to_string(node.output_min) +
                       " is not below output_max " + std::to_string(node.output_max));
      }
    }
    if (!entry.node()) return invalid(node.describe() + " has no parameter table");
    NodeReader reader(index_of_id, node);
    ETNA_TRY(node_type_info(node.type).read(entry.node(), reader, node));
  }
  return parsed;
}

}  // namespace etna::xnn
