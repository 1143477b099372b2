// What payload.cpp (the header and the entry point), payload_values.cpp
// (values and their quantization) and payload_nodes.cpp (the node readers)
// share; nothing outside those three files includes it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "backends/xnnpack/payload.h"

namespace etna::xnn::payload_detail {

namespace fbx = ::etna::xnnpack;

inline Error invalid(std::string message) { return make_error(ErrorCode::kInvalidProgram, std::move(message)); }

// Little-endian integers (the XH00 header, bf16 scale buffers).
inline uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
inline uint64_t read_u64(const uint8_t* p) { return uint64_t{read_u32(p)} | (uint64_t{read_u32(p + 4)} << 32); }

inline std::string hex32(uint32_t v) {
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

// Reads values entry `entry` into `value`: datatype, shape, external flags,
// quantization and constant bytes, each checked.
Status read_value(size_t entry, const fbx::Value& serialized, const ConstantResolver& constants, Value& value);

}  // namespace etna::xnn::payload_detail
