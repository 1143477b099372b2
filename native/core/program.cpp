#include "program.h"

#include <cstring>
#include <limits>
#include <utility>

#include "dtype.h"
#include "program_checks.h"
#include "state_snapshot.h"

namespace etna {
namespace {

constexpr size_t kIdentifierOffset = 4;
constexpr size_t kHeaderOffset = 8;
constexpr uint32_t kMinHeaderLength = 24;
constexpr uint32_t kHeaderLengthWithDataSize = 32;

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // the format is little-endian, as is every supported host
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Four identifier bytes as text when printable, else as hex.
std::string show_tag(const uint8_t* p) {
  std::string text;
  bool printable = true;
  for (int i = 0; i < 4; ++i) {
    if (p[i] < 0x20 || p[i] > 0x7e) printable = false;
    text.push_back(static_cast<char>(p[i]));
  }
  if (printable) return "'" + text + "'";
  static const char* kHex = "0123456789abcdef";
  std::string hex = "0x";
  for (int i = 0; i < 4; ++i) {
    hex.push_back(kHex[p[i] >> 4]);
    hex.push_back(kHex[p[i] & 15]);
  }
  return hex;
}

Error invalid(std::string message) { return make_error(ErrorCode::kInvalidProgram, std::move(message)); }

// Bytes [offsets[buffer_index], + nbytes) of the segment `entry` names. The
// errors name the entry (`table`), its segment and the value (`kind` and index).
Result<ByteSpan> subsegment_bytes(const Program& program, const fb::SubsegmentOffsets& entry, const char* table,
                                  const char* segment_name, const char* kind, uint32_t buffer_index, uint64_t nbytes) {
  const auto what = [&] { return kind + (" " + std::to_string(buffer_index)); };
  const auto* offsets = entry.offsets();
  if (!offsets || buffer_index >= offsets->size()) {
    return invalid(what() + " is out of range: " + table + " has " + std::to_string(offsets ? offsets->size() : 0) +
                   " offsets");
  }
  auto segment = program.segment(entry.segment_index());
  if (!segment) {
    return invalid(std::string(table) + ".segment_index " + std::to_string(entry.segment_index()) +
                   " does not name a segment with data");
  }
  const uint64_t offset = element(offsets, buffer_index);
  if (offset > segment->size || nbytes > segment->size - offset) {
    return invalid(what() + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + nbytes) +
                   ") run past " + segment_name + " " + std::to_string(segment->size) + " bytes");
  }
  return ByteSpan{segment->data + offset, static_cast<size_t>(nbytes)};
}

}  // namespace

Result<std::shared_ptr<const Program>> Program::load_file(const std::string& path, FileAccess access) {
  auto bytes = load_file_bytes(path, access);
  if (!bytes) return bytes.error();
  auto program = load(std::move(*bytes));
  if (!program) return invalid(path + ": " + program.error().message);
  return program;
}

Status Program::parse() {
  const uint8_t* data = bytes_->data();
  const size_t size = bytes_->size();
  if (size < kHeaderOffset) {
    return invalid("file is " + std::to_string(size) +
                   " bytes; a program needs at least 8 (root offset and 'ET12' identifier)");
  }
  const uint8_t* tag = data + kIdentifierOffset;
  if (std::memcmp(tag, "ET12", 4) != 0) {
    if (tag[0] == 'E' && tag[1] == 'T') {
      return invalid("identifier " + show_tag(tag) + " at byte 4: unsupported program version (etna reads 'ET12')");
    }
    return invalid("not an ExecuTorch program: identifier at byte 4 is " + show_tag(tag) + ", expected 'ET12'");
  }

  program_size_ = size;
  if (size >= kHeaderOffset + 8 && std::memcmp(data + kHeaderOffset, "eh00", 4) == 0) {
    ExtendedHeader header;
    header.header_length = read_u32(data + kHeaderOffset + 4);
    if (header.header_length < kMinHeaderLength) {
      return invalid("extended header at byte 8: header_length " + std::to_string(header.header_length) +
                     " is less than the minimum 24");
    }
    if (size < kHeaderOffset + uint64_t{header.header_length}) {
      return invalid("extended header at byte 8: header_length " + std::to_string(header.header_length) +
                     " runs past the end of the " + std::to_string(size) + "-byte file");
    }
    header.program_size = read_u64(data + 16);
    header.segment_base_offset = read_u64(data + 24);
    if (header.header_length >= kHeaderLengthWithDataSize) header.segment_data_size = read_u64(data + 32);

    if (header.program_size > size) {
      return invalid("extended header: program_size " + std::to_string(header.program_size) +
                     " (byte 16) exceeds the file size " + std::to_string(size));
    }
    if (header.program_size < kHeaderOffset + header.header_length) {
      return invalid("extended header: program_size " + std::to_string(header.program_size) +
                     " (byte 16) is smaller than the header itself");
    }
    if (header.segment_base_offset != 0 && header.segment_base_offset < header.program_size) {
      return invalid("extended header: segment_base_offset " + std::to_string(header.segment_base_offset) +
                     " (byte 24) lies inside the program region (program_size " + std::to_string(header.program_size) +
                     ")");
    }
    if (header.segment_base_offset > size) {
      return invalid("extended header: segment_base_offset " + std::to_string(header.segment_base_offset) +
                     " (byte 24) is past the end of the " + std::to_string(size) + "-byte file");
    }
    if (header.segment_data_size.value_or(0) > 0 && *header.segment_data_size > size - header.segment_base_offset) {
      return invalid("extended header: segments end at byte " + std::to_string(header.segment_base_offset) + " + " +
                     std::to_string(*header.segment_data_size) + " (segment_data_size, byte 32), past the end of the " +
                     std::to_string(size) + "-byte file (truncated?)");
    }
    program_size_ = header.program_size;
    header_ = header;
  }

  if (program_size_ > FLATBUFFERS_MAX_BUFFER_SIZE) {
    return invalid("program region is " + std::to_string(program_size_) + " bytes; the FlatBuffer limit is 2 GiB");
  }
  const uint8_t* tables = data;
  if (bytes_->mapped()) {
    auto region = copy_bytes(data, program_size_);
    if (!region) return region.error();
    program_region_ = std::move(*region);
    tables = program_region_->data();
  }
  flatbuffers::Verifier verifier(tables, program_size_, /*max_depth=*/64, /*max_tables=*/10'000'000);
  if (!verifier.VerifyBuffer<fb::Program>("ET12")) {
    return invalid("malformed FlatBuffer: " + locate_structure_error(tables, program_size_));
  }
  root_ = fb::GetProgram(tables);
  fingerprint_ = fingerprint_bytes(tables, static_cast<size_t>(program_size_));

  // Segment table: byte ranges relative to segment_base_offset, inside the file.
  const uint64_t base = header_ ? header_->segment_base_offset : 0;
  if (const auto* segments = root_->segments()) {
    segments_.reserve(segments->size());
    for (uint32_t i = 0; i < segments->size(); ++i) {
      const fb::DataSegment* segment = segments->Get(i);
      const uint64_t offset = segment->offset();
      const uint64_t length = segment->size();
      if (length == 0) {
        segments_.push_back(ByteSpan{data + std::min<uint64_t>(base, size), 0});
        continue;
      }
      if (base == 0) {
        segments_.push_back(std::nullopt);  // no segment region: unusable, checked where referenced
        continue;
      }
      if (offset > size - base || length > size - base - offset) {
        return invalid("segments[" + std::to_string(i) + "]: bytes [" + std::to_string(base + offset) + ", " +
                       std::to_string(base + offset + length) + ") (segment_base_offset " + std::to_string(base) +
                       " + offset " + std::to_string(offset) + ", size " + std::to_string(length) +
                       ") run past the end of the " + std::to_string(size) + "-byte file");
      }
      segments_.push_back(ByteSpan{data + base + offset, static_cast<size_t>(length)});
    }
  }
  return check_program(*this);
}

size_t Program::method_count() const { return root_->execution_plan() ? root_->execution_plan()->size() : 0; }

const fb::ExecutionPlan& Program::method(size_t index) const {
  return *root_->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(index));
}

std::optional<size_t> Program::find_method(std::string_view name) const {
  for (size_t i = 0; i < method_count(); ++i) {
    if (method(i).name()->string_view() == name) return i;
  }
  return std::nullopt;
}

std::optional<ByteSpan> Program::segment(uint32_t index) const {
  if (index >= segments_.size()) return std::nullopt;
  return segments_[index];
}

Result<ByteSpan> Program::constant_data(uint32_t buffer_index, uint64_t nbytes) const {
  const fb::SubsegmentOffsets* constant_segment = root_->constant_segment();
  if (constant_segment && constant_segment->offsets() && constant_segment->offsets()->size() > 0) {
    return subsegment_bytes(*this, *constant_segment, "constant_segment", "the constant segment's", "constant",
                            buffer_index, nbytes);
  }
  const auto* buffers = root_->constant_buffer();
  if (!buffers || buffer_index >= buffers->size()) {
    return invalid("constant " + std::to_string(buffer_index) + " is out of range: constant_buffer has " +
                   std::to_string(buffers ? buffers->size() : 0) + " entries");
  }
  const auto* storage = buffers->Get(buffer_index)->storage();
  const size_t available = storage ? storage->size() : 0;
  if (nbytes > available) {
    return invalid("constant_buffer[" + std::to_string(buffer_index) + "] holds " + std::to_string(available) +
                   " bytes; the tensor needs " + std::to_string(nbytes));
  }
  return ByteSpan{storage ? storage->data() : nullptr, static_cast<size_t>(nbytes)};
}

Result<ByteSpan> Program::mutable_initial_data(uint32_t buffer_index, uint64_t nbytes) const {
  const auto* entries = root_->mutable_data_segments();
  if (!entries || entries->size() == 0) {
    return invalid("initial value " + std::to_string(buffer_index) + " requested but mutable_data_segments is empty");
  }
  return subsegment_bytes(*this, *entries->Get(0), "mutable_data_segments[0]", "its segment's", "initial value",
                          buffer_index, nbytes);
}

std::optional<ByteSpan> Program::named_data(std::string_view key) const {
  const auto* entries = root_->named_data();
  if (!entries) return std::nullopt;
  for (const fb::NamedData* entry : *entries) {
    if (entry->key()->string_view() == key) return segment(entry->segment_index());
  }
  return std::nullopt;
}

ByteSpan Program::delegate_payload(const fb::BackendDelegate& delegate) const {
  const fb::BackendDelegateDataReference* ref = delegate.processed();
  if (ref->location() == fb::DataLocation::INLINE) {
    const auto* data = root_->backend_delegate_data()->Get(ref->index())->data();
    return data ? ByteSpan{data->data(), data->size()} : ByteSpan{};
  }
  return *segments_[ref->index()];
}

std::optional<uint64_t> tensor_nbytes(const fb::Tensor& tensor) {
  auto item = element_size(static_cast<int>(tensor.scalar_type()));
  if (!item || !tensor.sizes()) return std::nullopt;
  uint64_t total = *item;
  for (int32_t dim : *tensor.sizes()) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

std::string operator_key(const fb::Operator& op) {
  std::string key = op.name() ? op.name()->str() : std::string();
  if (op.overload() && op.overload()->size() > 0) {
    key += '.';
    key += op.overload()->str();
  }
  return key;
}

uint64_t planned_offset(const fb::AllocationDetails& allocation) {
  return uint64_t{allocation.memory_offset_low()} | (uint64_t{allocation.memory_offset_high()} << 32);
}

std::shared_ptr<BackendProgramContext> Program::backend_context(const Backend& backend) const {
  std::lock_guard<std::mutex> lock(backend_contexts_mutex_);
  auto it = backend_contexts_.find(backend.id());
  if (it == backend_contexts_.end()) {
    it = backend_contexts_.emplace(std::string(backend.id()), backend.create_program_context()).first;
  }
  return it->second;
}

}  // namespace etna
