// External named data (.ptd files, "FlatTensor"): tensors a program names by
// fully qualified name instead of storing them itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "program.h"
#include "status.h"

namespace etna {

struct NamedBlob {
  ByteSpan bytes;
  // The layout the file declares for the blob, when it declares one.
  bool has_layout = false;
  int scalar_type = 0;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> dim_order;
};

class DataMap : public ParsedBytes<DataMap> {
 public:
  // Reads the file into a private copy, or maps it (see FileAccess).
  static Result<std::shared_ptr<const DataMap>> load_file(const std::string& path,
                                                          FileAccess access = FileAccess::kCopy);

  std::optional<NamedBlob> find(std::string_view key) const;
  size_t size() const { return blobs_.size(); }
  // Every entry in file order, for describing the file.
  const std::vector<std::pair<std::string, NamedBlob>>& entries() const { return blobs_; }
  size_t segment_count() const { return segment_count_; }
  // INVALID_PROGRAM when the file was mapped and has changed since.
  Status check_unchanged() const { return bytes_->check_unchanged(); }
  // Hands the pages read so far back to the OS when the file is mapped
  // (ByteSource::release_pages); nothing for a copy.
  void release_pages() const { bytes_->release_pages(0, bytes_->size()); }

 private:
  friend class ParsedBytes<DataMap>;
  DataMap() = default;
  Status parse();

  std::unique_ptr<ByteSource> bytes_;
  std::vector<std::pair<std::string, NamedBlob>> blobs_;
  size_t segment_count_ = 0;
};

// The one question asked before a module reads file bytes (loading a method,
// a call): has the program's file, or its external data file, changed on disk
// since it was mapped? INVALID_PROGRAM naming the file if so.
Status check_unchanged(const Program& program, const DataMap* external_data);

// After a method has loaded (its delegates packed what they keep), the pages
// of the mapped program's segments and external data file that the load read
// go back to the OS; what a call reads later maps in again.
void release_pages_read_at_load(const Program& program, const DataMap* external_data);

}  // namespace etna
