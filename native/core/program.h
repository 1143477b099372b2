// A loaded, verified, immutable ExecuTorch program (.pte).
//
// Loading runs the FlatBuffers verifier and then checks every index, offset,
// size and enum the runtime will later follow, so code that reads a Program
// afterwards may index without re-checking. A Program may be shared by any
// number of Modules; all mutable memory belongs to them.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend.h"
#include "bytes.h"
#include "generated/program_generated.h"
#include "memory.h"
#include "status.h"

namespace etna {

namespace fb = ::etna::pte;

// The optional `eh00` header spliced in after the file identifier.
struct ExtendedHeader {
  uint32_t header_length = 0;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  std::optional<uint64_t> segment_data_size;  // present when header_length >= 32
};

class Program : public ParsedBytes<Program> {
 public:
  // Reads the file into a private copy, or maps it (see FileAccess).
  static Result<std::shared_ptr<const Program>> load_file(const std::string& path,
                                                          FileAccess access = FileAccess::kCopy);

  const fb::Program& root() const { return *root_; }
  // A fingerprint of the FlatBuffer region (state_snapshot.h's
  // fingerprint_bytes): the same file gives the same value in every process.
  uint64_t fingerprint() const { return fingerprint_; }
  size_t file_size() const { return bytes_->size(); }
  // Memory the program holds of its own from load on: its copy of the file,
  // or, for a mapped file, the copy of its FlatBuffer region (the mapping is
  // page cache). Packed weights and pooled arenas come later, with modules.
  size_t owned_bytes() const {
    return (bytes_->mapped() ? 0 : bytes_->size()) + (program_region_ ? program_region_->size() : 0);
  }
  const std::optional<ExtendedHeader>& extended_header() const { return header_; }
  // INVALID_PROGRAM when the program was mapped and its file has changed since;
  // anything that reads segment data (loading a method, a call) asks first.
  Status check_unchanged() const { return bytes_->check_unchanged(); }

  size_t method_count() const;
  const fb::ExecutionPlan& method(size_t index) const;
  // First plan with this name (the format's lookup rule).
  std::optional<size_t> find_method(std::string_view name) const;

  // Bytes of segment `index`; nullopt when the file has no segment data for it.
  std::optional<ByteSpan> segment(uint32_t index) const;
  // Bytes of constant `buffer_index` (Tensor.data_buffer_idx); at least `nbytes` long.
  Result<ByteSpan> constant_data(uint32_t buffer_index, uint64_t nbytes) const;
  // Initial value of a planned mutable tensor, from mutable_data_segments[0].
  Result<ByteSpan> mutable_initial_data(uint32_t buffer_index, uint64_t nbytes) const;
  // Named data blob by exact key.
  std::optional<ByteSpan> named_data(std::string_view key) const;
  // Once a method's delegates have taken what they keep from segment data
  // (packed weights, say), hands the pages of the file read so far back to
  // the OS when it is mapped (ByteSource::release_pages; the FlatBuffer region
  // is read from its copy); nothing for a copy.
  void release_file_pages() const { bytes_->release_pages(0, bytes_->size()); }
  // A delegate's payload (inline or in a segment); verified at load.
  ByteSpan delegate_payload(const fb::BackendDelegate& delegate) const;
  // The backend's state shared by every module over this program, made on
  // the first request (null when the backend shares nothing). Thread-safe.
  std::shared_ptr<BackendProgramContext> backend_context(const Backend& backend) const;
  // Activation arenas lent per call to the modules over this program whose
  // mem_id 1 carries nothing between calls (see Module).
  ArenaPool& activation_pool() const { return activation_pool_; }

 private:
  friend class ParsedBytes<Program>;
  Program() = default;
  Status parse();

  // The whole file. When it is a mapping, the FlatBuffer region is also copied
  // into `program_region_` and read from there, so that the verified tables
  // cannot change under the runtime; only segment data stays mapped.
  std::unique_ptr<ByteSource> bytes_;
  std::unique_ptr<ByteSource> program_region_;
  std::optional<ExtendedHeader> header_;
  uint64_t program_size_ = 0;
  uint64_t fingerprint_ = 0;
  const fb::Program* root_ = nullptr;
  std::vector<std::optional<ByteSpan>> segments_;
  mutable std::mutex backend_contexts_mutex_;
  mutable std::map<std::string, std::shared_ptr<BackendProgramContext>, std::less<>> backend_contexts_;
  mutable ArenaPool activation_pool_;
};

// Element i of a FlatBuffer vector of 8-byte scalars. The format does not
// promise 8-byte alignment for these (real files have misaligned IntLists), so
// they are read with memcpy rather than through the generated accessors.
template <typename T>
T element(const flatbuffers::Vector<T>* vec, size_t i) {
  static_assert(std::is_arithmetic_v<T>, "scalar vectors only");
  T value;
  std::memcpy(&value, vec->Data() + i * sizeof(T), sizeof(T));
  return value;
}

// Bytes a tensor occupies at its stored (upper-bound) sizes, or nullopt on
// overflow / unknown dtype. Rank 0 counts as one element.
std::optional<uint64_t> tensor_nbytes(const fb::Tensor& tensor);

// "name.overload", or "name" for the default overload.
std::string operator_key(const fb::Operator& op);

// A planned tensor's arena byte offset.
uint64_t planned_offset(const fb::AllocationDetails& allocation);

}  // namespace etna
