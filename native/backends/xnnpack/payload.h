// Reading an XnnpackBackend payload: the optional `XH00` header, the
// FlatBuffer graph (verified) and its constants, into a Graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "backends/xnnpack/graph.h"
#include "core/bytes.h"
#include "core/status.h"

namespace etna::xnn {

// Where the parts of a payload are (offsets already checked against its size).
struct PayloadLayout {
  bool has_header = false;
  ByteSpan flatbuffer;
  ByteSpan constant_region;  // empty without header
};

// Splits and checks the header (spec section 2); the FlatBuffer itself is not
// looked at beyond its identifier.
Result<PayloadLayout> split_payload(ByteSpan payload);

// Named-data lookup by exact key (the program's NamedData table).
using NamedDataLookup = std::function<std::optional<ByteSpan>(std::string_view key)>;

struct ParsedPayload {
  Graph graph;
  // Aligned copy of the FlatBuffer when the payload was not 16-byte aligned;
  // constants of legacy payloads may point into it, so it lives as long as
  // the graph's constant spans are used (init only).
  std::shared_ptr<ByteSource> flatbuffer_copy;
};

// Verifies the FlatBuffer, resolves every id and constant, and checks each
// value's structure. Node semantics are checked by check_graph().
Result<ParsedPayload> parse_payload(ByteSpan payload, const NamedDataLookup& named_data);

// Copies one node table's fields into a Node, resolving value ids to dense
// indices (the rows' read functions use it).
class NodeReader {
 public:
  NodeReader(const std::unordered_map<uint32_t, uint32_t>& index_of_id, Node& node)
      : index_of_id_(index_of_id), node_(node) {}

  Status input(uint32_t id, const char* field, bool optional = false);
  Status output(uint32_t id, const char* field);

 private:
  Result<uint32_t> resolve(uint32_t id, const char* field, bool optional);

  const std::unordered_map<uint32_t, uint32_t>& index_of_id_;
  Node& node_;
};

// The rows' read functions (rows in node_types.cpp, bodies in
// payload_nodes.cpp): `table` is the node's XNode union member, of the type
// the function's name says.
Status read_binary_node(const void* table, NodeReader& reader, Node& node);
Status read_unary_node(const void* table, NodeReader& reader, Node& node);
Status read_fully_connected_node(const void* table, NodeReader& reader, Node& node);
Status read_convolution_node(const void* table, NodeReader& reader, Node& node);
Status read_pooling_node(const void* table, NodeReader& reader, Node& node);
Status read_argmax_pooling_node(const void* table, NodeReader& reader, Node& node);
Status read_transpose_node(const void* table, NodeReader& reader, Node& node);
Status read_resize_bilinear_node(const void* table, NodeReader& reader, Node& node);
Status read_constant_pad_node(const void* table, NodeReader& reader, Node& node);
Status read_reshape_node(const void* table, NodeReader& reader, Node& node);
Status read_slice_node(const void* table, NodeReader& reader, Node& node);
Status read_concatenate_node(const void* table, NodeReader& reader, Node& node);
Status read_leaky_relu_node(const void* table, NodeReader& reader, Node& node);
Status read_elu_node(const void* table, NodeReader& reader, Node& node);
Status read_attention_node(const void* table, NodeReader& reader, Node& node);

}  // namespace etna::xnn
