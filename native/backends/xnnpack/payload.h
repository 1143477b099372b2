// Reading an XnnpackBackend payload: the optional `XH00` header, the
// FlatBuffer graph (verified) and its constants, into a Graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

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

}  // namespace etna::xnn
