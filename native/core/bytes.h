// Owned, immutable byte regions that a Program or DataMap reads from: a
// private 64-byte-aligned copy (of a file or of caller bytes), or, when asked
// for, a read-only mapping of a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "status.h"

namespace etna {

struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// How a file named by path becomes bytes.
enum class FileAccess {
  // Read once into a private copy: nothing done to the file later reaches it.
  kCopy,
  // Mapped read-only and shared with the page cache. Truncating or rewriting
  // the file in place would change or remove pages under a running call, so
  // such a file must be replaced by renaming a new file over it.
  kMap,
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  ByteSpan span() const { return ByteSpan{data(), size()}; }
  // True when the bytes are a mapping of a file (they can change under us).
  virtual bool mapped() const { return false; }
  // INVALID_PROGRAM when a mapped file has been truncated or written in place
  // since it was mapped, so a caller can refuse to read it; always ok for a copy.
  virtual Status check_unchanged() const { return Status::ok(); }
  // Gives the pages of [offset, offset + size) that this process has read
  // back to the OS where reading them again is safe: a mapping drops them (a
  // later read faults them in again from the file, in the page cache as a
  // rule); a private copy keeps its bytes.
  virtual void release_pages(size_t offset, size_t size) const {
    (void)offset;
    (void)size;
  }
};

// Reads a regular file into a private aligned copy in one pass, or maps it.
// An empty file yields an empty source. Errors name the path.
Result<std::unique_ptr<ByteSource>> load_file_bytes(const std::string& path, FileAccess access);

// Copies `size` bytes into a 64-byte-aligned allocation (FlatBuffers and
// kernels need aligned data; caller buffers promise nothing).
Result<std::unique_ptr<ByteSource>> copy_bytes(const uint8_t* data, size_t size);

// The two ways a Program or a DataMap is made from bytes: over a private copy
// of caller bytes, or over bytes handed over. T::parse() reads them from
// T::bytes_ (T befriends this class for those and for its constructor).
template <typename T>
class ParsedBytes {
 public:
  static Result<std::shared_ptr<const T>> load_bytes(const uint8_t* data, size_t size) {
    auto bytes = copy_bytes(data, size);
    if (!bytes) return bytes.error();
    return load(std::move(*bytes));
  }
  // Takes ownership of already-owned bytes (a copy or a mapping).
  static Result<std::shared_ptr<const T>> load(std::unique_ptr<ByteSource> bytes) {
    std::shared_ptr<T> parsed(new T());
    parsed->bytes_ = std::move(bytes);
    ETNA_TRY(parsed->parse());
    return std::shared_ptr<const T>(std::move(parsed));
  }
};

}  // namespace etna
