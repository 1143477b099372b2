#include "backends/xnnpack/payload_internal.h"

#include "backends/xnnpack/node_types.h"

namespace etna::xnn {
namespace {

namespace fbx = ::etna::xnnpack;
using payload_detail::invalid;

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
  node.perm = to_sizes(t.perm());
  if (t.num_dims() != node.perm.size()) {
    return invalid(node.describe() + ": num_dims " + std::to_string(t.num_dims()) + " but perm has " +
                   std::to_string(node.perm.size()) + " entries");
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
  node.pre_paddings = to_sizes(t.pre_paddings());
  node.post_paddings = to_sizes(t.post_paddings());
  node.padding_value = t.padding_value();
  return read_single_io(t, reader, node);
}

Status read_reshape_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticReshape*>(table);
  node.new_shape = to_sizes(t.new_shape());
  return read_single_io(t, reader, node);
}

Status read_slice_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::StaticSlice*>(table);
  node.offsets = to_sizes(t.offsets());
  node.sizes = to_sizes(t.sizes());
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
  node.negative_slope = t.negative_slope();
  return read_single_io(t, reader, node);
}

Status read_elu_node(const void* table, NodeReader& reader, Node& node) {
  const auto& t = *static_cast<const fbx::Elu*>(table);
  node.alpha = t.alpha();
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

}  // namespace etna::xnn
