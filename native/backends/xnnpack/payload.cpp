#include "backends/xnnpack/payload.h"

#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "backends/xnnpack/node_types.h"
#include "backends/xnnpack/payload_internal.h"

namespace etna::xnn {
namespace {

namespace fbx = ::etna::xnnpack;
using payload_detail::ConstantResolver;
using payload_detail::hex32;
using payload_detail::invalid;
using payload_detail::read_u16;
using payload_detail::read_u32;
using payload_detail::read_u64;
using payload_detail::read_value;

constexpr size_t kHeaderBytes = 30;

}  // namespace

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
