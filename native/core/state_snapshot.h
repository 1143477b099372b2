// The wire form of a module's state (mem_id 2) saved as bytes, and the state
// layout it is checked against.
//
// Every multi-byte field is little-endian:
//
//   offset  size  field
//        0     4  magic "ETSS"
//        4     4  format version (kStateSnapshotVersion)
//        8     8  layout fingerprint: the state arena's size and the offset,
//                 size, dtype and name of every tensor planned in it
//       16     8  program fingerprint: the program's FlatBuffer region
//       24     8  the state arena's size in bytes
//       32     4  range count R
//       36     4  zero
//       40  16*R  ranges: offset and size (8 bytes each), ascending, disjoint,
//                 inside the arena
//   40+16R     …  the bytes of each range, in order; nothing after them
//
// A full snapshot carries the bytes planned tensors cover (gaps in the arena
// hold nothing a method reads); a partial one, any ranges its maker chose
// (the cache rows a session has filled, say). Reading one writes its ranges
// and leaves the rest of the arena as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "status.h"

namespace etna {

inline constexpr uint32_t kStateSnapshotVersion = 1;
inline constexpr size_t kStateSnapshotHeaderBytes = 40;

struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// What a module's state looks like: computed once from the program.
struct StateLayout {
  uint64_t arena_bytes = 0;
  std::vector<ByteRange> ranges;  // merged, ascending
  uint64_t layout_fingerprint = 0;
  uint64_t program_fingerprint = 0;

  uint64_t payload_bytes() const;
  uint64_t snapshot_bytes() const { return kStateSnapshotHeaderBytes + 16 * ranges.size() + payload_bytes(); }
};

// kInvalidInput unless `ranges` are ascending, disjoint and inside an arena
// of `arena_bytes`.
Status check_state_ranges(const std::vector<ByteRange>& ranges, uint64_t arena_bytes);

// A 64-bit fingerprint of `size` bytes (not cryptographic: it tells layouts
// and programs apart, it does not resist forgery), continuing from `seed`.
uint64_t fingerprint_bytes(const uint8_t* data, size_t size, uint64_t seed = 0);

// Writes the snapshot of `arena` (layout.arena_bytes long) into `out`, which
// holds exactly layout.snapshot_bytes() bytes.
void write_state_snapshot(const StateLayout& layout, const uint8_t* arena, uint8_t* out);

// Checks `snapshot` against `layout` (kInvalidInput naming the first fault:
// not a snapshot, another version, truncated, another program or layout) and
// on success copies its ranges into `arena`. Nothing is written on failure.
Status read_state_snapshot(const StateLayout& layout, const uint8_t* snapshot, size_t size, uint8_t* arena);

}  // namespace etna
