// The state snapshot's wire form: what it writes, and that every fault in
// the bytes read back is refused by name before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/state_snapshot.h"

namespace etna {
namespace {

StateLayout two_range_layout() {
  StateLayout layout;
  layout.arena_bytes = 64;
  layout.ranges = {ByteRange{0, 16}, ByteRange{32, 8}};
  layout.layout_fingerprint = 0x1122334455667788ull;
  layout.program_fingerprint = 0x99AABBCCDDEEFF00ull;
  return layout;
}

std::vector<uint8_t> arena_of(size_t size, uint8_t first) {
  std::vector<uint8_t> arena(size);
  std::iota(arena.begin(), arena.end(), first);
  return arena;
}

std::vector<uint8_t> saved(const StateLayout& layout, const std::vector<uint8_t>& arena) {
  std::vector<uint8_t> snapshot(layout.snapshot_bytes());
  write_state_snapshot(layout, arena.data(), snapshot.data());
  return snapshot;
}

// Reads `snapshot` into a copy of `arena` and expects a refusal naming `fault`, with the copy untouched.
void expect_refused(const StateLayout& layout, const std::vector<uint8_t>& snapshot, const std::string& fault) {
  std::vector<uint8_t> arena = arena_of(64, 200);
  const std::vector<uint8_t> before = arena;
  Status status = read_state_snapshot(layout, snapshot.data(), snapshot.size(), arena.data());
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(status.error().message.find(fault), std::string::npos) << status.error().message;
  EXPECT_EQ(arena, before);
}

uint64_t read_u64(const std::vector<uint8_t>& bytes, size_t at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return value;
}

TEST(StateSnapshot, WritesTheHeaderRangesAndCoveredBytesOnly) {
  const StateLayout layout = two_range_layout();
  EXPECT_EQ(layout.payload_bytes(), 24u);
  EXPECT_EQ(layout.snapshot_bytes(), 40u + 2 * 16 + 24);
  const std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  EXPECT_EQ(std::string(snapshot.begin(), snapshot.begin() + 4), "ETSS");
  EXPECT_EQ(snapshot[4], kStateSnapshotVersion);
  EXPECT_EQ(read_u64(snapshot, 8), layout.layout_fingerprint);
  EXPECT_EQ(read_u64(snapshot, 16), layout.program_fingerprint);
  EXPECT_EQ(read_u64(snapshot, 24), 64u);
  EXPECT_EQ(snapshot[32], 2u);
  EXPECT_EQ(read_u64(snapshot, 40), 0u);
  EXPECT_EQ(read_u64(snapshot, 48), 16u);
  EXPECT_EQ(read_u64(snapshot, 56), 32u);
  EXPECT_EQ(read_u64(snapshot, 64), 8u);
  EXPECT_EQ(snapshot[72], 0u);
  EXPECT_EQ(snapshot[72 + 15], 15u);
  EXPECT_EQ(snapshot[72 + 16], 32u);
  EXPECT_EQ(snapshot.back(), 39u);
}

TEST(StateSnapshot, ReadsBackIntoTheCoveredBytesAndLeavesTheGaps) {
  const StateLayout layout = two_range_layout();
  const std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  std::vector<uint8_t> arena = arena_of(64, 100);
  ASSERT_TRUE(read_state_snapshot(layout, snapshot.data(), snapshot.size(), arena.data()));
  for (size_t i = 0; i < 64; ++i) {
    const bool covered = i < 16 || (i >= 32 && i < 40);
    EXPECT_EQ(arena[i], covered ? i : 100 + i) << "byte " << i;
  }
}

TEST(StateSnapshot, AnEmptyStateRoundTrips) {
  StateLayout layout;
  std::vector<uint8_t> snapshot(layout.snapshot_bytes());
  EXPECT_EQ(snapshot.size(), kStateSnapshotHeaderBytes);
  write_state_snapshot(layout, nullptr, snapshot.data());
  EXPECT_TRUE(read_state_snapshot(layout, snapshot.data(), snapshot.size(), nullptr));
}

TEST(StateSnapshot, RefusesBytesThatAreNotASnapshot) {
  const StateLayout layout = two_range_layout();
  expect_refused(layout, {}, "0 bytes is shorter than a snapshot's 40-byte header");
  std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  snapshot[0] = 'X';
  expect_refused(layout, snapshot, "do not start with 'ETSS'");
}

TEST(StateSnapshot, RefusesAnotherVersionLayoutOrProgram) {
  const StateLayout layout = two_range_layout();
  std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  snapshot[4] = 2;
  expect_refused(layout, snapshot, "format version 2, this etna reads version 1");

  StateLayout other = layout;
  other.layout_fingerprint ^= 1;
  expect_refused(other, saved(layout, arena_of(64, 0)), "laid out differently");
  other = layout;
  other.arena_bytes = 128;
  expect_refused(other, saved(layout, arena_of(64, 0)), "laid out differently");
  other = layout;
  other.program_fingerprint ^= 1;
  expect_refused(other, saved(layout, arena_of(64, 0)), "another program with the same state layout");
}

TEST(StateSnapshot, RefusesTruncatedOrPaddedSnapshots) {
  const StateLayout layout = two_range_layout();
  const std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  for (size_t size : {size_t{40}, size_t{60}}) {
    expect_refused(layout, std::vector<uint8_t>(snapshot.begin(), snapshot.begin() + size), "truncated: 2 ranges");
  }
  expect_refused(layout, std::vector<uint8_t>(snapshot.begin(), snapshot.end() - 1), "truncated: the ranges hold 24");
  std::vector<uint8_t> padded = snapshot;
  padded.push_back(0);
  expect_refused(layout, padded, "trailing bytes");
}

TEST(StateSnapshot, RefusesRangesOutsideTheArenaOrOutOfOrder) {
  const StateLayout layout = two_range_layout();
  std::vector<uint8_t> snapshot = saved(layout, arena_of(64, 0));
  std::vector<uint8_t> past_end = snapshot;
  past_end[56] = 60;  // second range [60, +8) ends past 64
  expect_refused(layout, past_end, "range 1 [60, +8) is out of order or outside the 64-byte state");
  std::vector<uint8_t> overlapping = snapshot;
  overlapping[56] = 8;  // second range starts inside the first
  expect_refused(layout, overlapping, "range 1 [8, +8)");
  std::vector<uint8_t> huge = snapshot;
  std::memset(huge.data() + 48, 0xFF, 8);  // a size that would wrap offset + size
  expect_refused(layout, huge, "range 0");
  std::vector<uint8_t> reserved = snapshot;
  reserved[36] = 1;
  expect_refused(layout, reserved, "bytes 36 to 39");
}

TEST(StateSnapshot, FingerprintsTellBytesAndLengthsApart) {
  const uint8_t a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint8_t b[9];
  std::memcpy(b, a, 9);
  EXPECT_EQ(fingerprint_bytes(a, 9), fingerprint_bytes(b, 9));
  b[8] = 10;
  EXPECT_NE(fingerprint_bytes(a, 9), fingerprint_bytes(b, 9));
  EXPECT_NE(fingerprint_bytes(a, 8), fingerprint_bytes(a, 9));
  EXPECT_NE(fingerprint_bytes(a, 0), fingerprint_bytes(a, 0, 1));
  const uint8_t zeros[16] = {};
  EXPECT_NE(fingerprint_bytes(zeros, 8), fingerprint_bytes(zeros, 16));
}

}  // namespace
}  // namespace etna
