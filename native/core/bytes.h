// Owned, immutable byte regions that a Program reads from: a memory-mapped
// file (constants stay in the page cache, nothing is copied) or an aligned
// copy of caller bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "status.h"

namespace etna {

struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  ByteSpan span() const { return ByteSpan{data(), size()}; }
};

// Maps `path` read-only. An empty file yields an empty source.
Result<std::unique_ptr<ByteSource>> map_file(const std::string& path);

// Copies `size` bytes into a 64-byte-aligned allocation (FlatBuffers and
// kernels need aligned data; caller buffers promise nothing).
Result<std::unique_ptr<ByteSource>> copy_bytes(const uint8_t* data, size_t size);

}  // namespace etna
