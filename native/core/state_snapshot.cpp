#include "state_snapshot.h"

#include <cstring>

namespace etna {
namespace {

constexpr char kMagic[4] = {'E', 'T', 'S', 'S'};

void put_u32(uint8_t* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

void put_u64(uint8_t* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint32_t get_u32(const uint8_t* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}

uint64_t get_u64(const uint8_t* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

std::string hex(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) text[static_cast<size_t>(i)] = digits[value & 15];
  return text;
}

Error invalid(const std::string& what) { return make_error(ErrorCode::kInvalidInput, "state snapshot: " + what); }

}  // namespace

Status check_state_ranges(const std::vector<ByteRange>& ranges, uint64_t arena_bytes) {
  uint64_t previous_end = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    const ByteRange& range = ranges[r];
    if (range.offset < previous_end || range.offset > arena_bytes || range.size > arena_bytes - range.offset) {
      return invalid("range " + std::to_string(r) + " [" + std::to_string(range.offset) + ", +" +
                     std::to_string(range.size) + ") is out of order or outside the " + std::to_string(arena_bytes) +
                     "-byte state");
    }
    previous_end = range.offset + range.size;
  }
  return Status::ok();
}

uint64_t StateLayout::payload_bytes() const {
  uint64_t total = 0;
  for (const ByteRange& range : ranges) total += range.size;
  return total;
}

uint64_t fingerprint_bytes(const uint8_t* data, size_t size, uint64_t seed) {
  // Eight bytes a step, each mixed in with a multiply and a rotation, then the
  // length: fast enough to run over a program's tables at every load.
  constexpr uint64_t kPrime = 0x9E3779B97F4A7C15ull;
  uint64_t h = seed ^ 0xCBF29CE484222325ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * kPrime;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  for (size_t k = 0; i + k < size; ++k) tail |= static_cast<uint64_t>(data[i + k]) << (8 * k);
  h = (h ^ tail ^ (static_cast<uint64_t>(size) << 1)) * kPrime;
  h ^= h >> 32;
  return h;
}

void write_state_snapshot(const StateLayout& layout, const uint8_t* arena, uint8_t* out) {
  std::memcpy(out, kMagic, 4);
  put_u32(out + 4, kStateSnapshotVersion);
  put_u64(out + 8, layout.layout_fingerprint);
  put_u64(out + 16, layout.program_fingerprint);
  put_u64(out + 24, layout.arena_bytes);
  put_u32(out + 32, static_cast<uint32_t>(layout.ranges.size()));
  put_u32(out + 36, 0);
  uint8_t* cursor = out + kStateSnapshotHeaderBytes;
  for (const ByteRange& range : layout.ranges) {
    put_u64(cursor, range.offset);
    put_u64(cursor + 8, range.size);
    cursor += 16;
  }
  for (const ByteRange& range : layout.ranges) {
    if (range.size > 0) std::memcpy(cursor, arena + range.offset, static_cast<size_t>(range.size));
    cursor += range.size;
  }
}

Status read_state_snapshot(const StateLayout& layout, const uint8_t* snapshot, size_t size, uint8_t* arena) {
  if (size < kStateSnapshotHeaderBytes || std::memcmp(snapshot, kMagic, 4) != 0) {
    return invalid(size < kStateSnapshotHeaderBytes ? std::to_string(size) + " bytes is shorter than a snapshot's " +
                                                          std::to_string(kStateSnapshotHeaderBytes) + "-byte header"
                                                    : "the bytes do not start with 'ETSS'; they are not a saved state");
  }
  const uint32_t version = get_u32(snapshot + 4);
  if (version != kStateSnapshotVersion) {
    return invalid("format version " + std::to_string(version) + ", this etna reads version " +
                   std::to_string(kStateSnapshotVersion));
  }
  const uint64_t layout_fingerprint = get_u64(snapshot + 8);
  const uint64_t program_fingerprint = get_u64(snapshot + 16);
  const uint64_t arena_bytes = get_u64(snapshot + 24);
  if (layout_fingerprint != layout.layout_fingerprint || arena_bytes != layout.arena_bytes) {
    return invalid("saved from a program whose state is laid out differently (state layout " + hex(layout_fingerprint) +
                   ", " + std::to_string(arena_bytes) + " bytes; this module's: " + hex(layout.layout_fingerprint) +
                   ", " + std::to_string(layout.arena_bytes) + " bytes)");
  }
  if (program_fingerprint != layout.program_fingerprint) {
    return invalid("saved from another program with the same state layout (program " + hex(program_fingerprint) +
                   ", this module's " + hex(layout.program_fingerprint) + ")");
  }
  const uint64_t count = get_u32(snapshot + 32);
  if (get_u32(snapshot + 36) != 0) return invalid("bytes 36 to 39 of the header must be zero");
  const uint64_t table_end = kStateSnapshotHeaderBytes + 16 * count;
  if (table_end > size) {
    return invalid("truncated: " + std::to_string(count) + " ranges need " + std::to_string(table_end) +
                   " bytes of header, the snapshot has " + std::to_string(size));
  }
  std::vector<ByteRange> ranges(static_cast<size_t>(count));
  for (uint64_t r = 0; r < count; ++r) {
    ranges[r] = ByteRange{get_u64(snapshot + kStateSnapshotHeaderBytes + 16 * r),
                          get_u64(snapshot + kStateSnapshotHeaderBytes + 16 * r + 8)};
  }
  ETNA_TRY(check_state_ranges(ranges, layout.arena_bytes));
  uint64_t payload = 0;
  for (const ByteRange& range : ranges) payload += range.size;
  if (size - table_end != payload) {
    return invalid(std::string(size - table_end < payload ? "truncated" : "trailing bytes") + ": the ranges hold " +
                   std::to_string(payload) + " bytes, the snapshot carries " + std::to_string(size - table_end));
  }
  const uint8_t* cursor = snapshot + table_end;
  for (const ByteRange& range : ranges) {
    if (range.size > 0) std::memcpy(arena + range.offset, cursor, static_cast<size_t>(range.size));
    cursor += range.size;
  }
  return Status::ok();
}

}  // namespace etna
