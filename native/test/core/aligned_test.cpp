// The runtime's aligned allocator: every block is aligned and usable over its
// capacity, zeroed blocks read as zero, and a large block's pages go back to
// the OS the moment it is freed (what makes dispose() free at once).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/aligned.h"

namespace etna {
namespace {

constexpr size_t MiB = size_t{1024} * 1024;

// This process's resident set, from /proc/self/statm (in pages).
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

bool aligned_to(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

TEST(AlignedAllocation, BlocksOfEverySizeAreAlignedAndWritableToTheirCapacity) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, kMappedBlockMin - 1, kMappedBlockMin,
                       3 * MiB + 5}) {
    AlignedAllocation block = allocate_aligned(bytes);
    ASSERT_NE(block.data, nullptr) << bytes;
    EXPECT_TRUE(aligned_to(block.data.get(), kAllocationAlignment)) << bytes;
    EXPECT_GE(block.capacity, bytes == 0 ? kAllocationAlignment : bytes);
    EXPECT_EQ(block.capacity % kAllocationAlignment, 0u);
    std::memset(block.data.get(), 0xab, block.capacity);
    EXPECT_EQ(block.data.get()[block.capacity - 1], 0xab);
  }
}

TEST(AlignedAllocation, ZeroedBlocksReadAsZeroEvenWhereFreedBlocksWereWritten) {
  for (size_t bytes : {size_t{4096}, kMappedBlockMin, 5 * MiB}) {
    // Dirty blocks of the same size first, so that a reused one would show.
    for (int round = 0; round < 2; ++round) {
      AlignedAllocation dirty = allocate_aligned(bytes);
      ASSERT_NE(dirty.data, nullptr);
      std::memset(dirty.data.get(), 0x5a, dirty.capacity);
    }
    AlignedAllocation zeroed = allocate_aligned(bytes, Fill::kZero);
    ASSERT_NE(zeroed.data, nullptr);
    std::vector<uint8_t> zeros(zeroed.capacity, 0);
    EXPECT_EQ(std::memcmp(zeroed.data.get(), zeros.data(), zeroed.capacity), 0) << bytes;
  }
}

TEST(AlignedAllocation, RawBlocksHonourLargerAlignments) {
  for (size_t alignment : {size_t{1}, size_t{16}, size_t{128}, size_t{4096}, size_t{65536}}) {
    for (size_t bytes : {size_t{10}, 2 * kMappedBlockMin}) {
      void* block = allocate_aligned_block(bytes, alignment, false);
      ASSERT_NE(block, nullptr);
      EXPECT_TRUE(aligned_to(block, alignment < 8 ? 8 : alignment)) << alignment << " " << bytes;
      std::memset(block, 1, bytes);
      free_aligned_block(block);
    }
  }
  EXPECT_EQ(allocate_aligned_block(10, 48, false), nullptr);  // not a power of two
  free_aligned_block(nullptr);
}

TEST(AlignedAllocation, AFreedLargeBlockGivesItsPagesBackAtOnce) {
  if (!maps_large_blocks()) {
    // AddressSanitizer builds keep freed blocks in quarantine, so the
    // resident set says nothing there; the block must still work.
    AlignedAllocation block = allocate_aligned(32 * MiB);
    ASSERT_NE(block.data, nullptr);
    std::memset(block.data.get(), 1, block.capacity);
    return;
  }
  // Several rounds: were freed blocks kept for reuse (as malloc may), the
  // resident set would stay up after the first free.
  for (int round = 0; round < 3; ++round) {
    const size_t before = resident_bytes();
    AlignedAllocation block = allocate_aligned(32 * MiB);
    ASSERT_NE(block.data, nullptr);
    std::memset(block.data.get(), 1, block.capacity);
    EXPECT_GE(resident_bytes(), before + 30 * MiB) << "round " << round;
    block.data.reset();
    EXPECT_LE(resident_bytes(), before + 2 * MiB) << "round " << round;
  }
}

TEST(AlignedAllocation, ResidentBytesCountOnlyTouchedPagesOfAMappedBlock) {
  AlignedAllocation small = allocate_aligned(1000);
  ASSERT_NE(small.data, nullptr);
  EXPECT_EQ(block_resident_bytes(small.data.get(), 1000), 1000u);  // a heap block counts whole
  AlignedAllocation block = allocate_aligned(32 * MiB, Fill::kZero);
  ASSERT_NE(block.data, nullptr);
  if (!maps_large_blocks()) {
    EXPECT_EQ(block_resident_bytes(block.data.get(), 32 * MiB), 32 * MiB);
    return;
  }
  // The block's header sits in its first page, so at most one huge page is in.
  const size_t fresh = block_resident_bytes(block.data.get(), 32 * MiB);
  EXPECT_LE(fresh, 2 * MiB);
  std::memset(block.data.get() + 20 * MiB, 1, 3 * MiB);
  const size_t touched = block_resident_bytes(block.data.get(), 32 * MiB);
  EXPECT_GE(touched, fresh + 3 * MiB);
  EXPECT_LE(touched, fresh + 3 * MiB + 4 * MiB);  // rounded out to huge pages at most
  // A range that starts and ends inside pages counts only its own bytes.
  EXPECT_EQ(block_resident_bytes(block.data.get() + 20 * MiB + 100, MiB), MiB);
  std::memset(block.data.get(), 2, block.capacity);
  EXPECT_EQ(block_resident_bytes(block.data.get(), block.capacity), block.capacity);
}

TEST(AlignedAllocation, HugePageAdviceLeavesTheBytesAsTheyWere) {
  // Advice over ranges that hold no whole huge page, that start and end
  // inside one, and over a zeroed block: the bytes read the same after.
  std::vector<uint8_t> small(1000, 5);
  advise_huge_pages(small.data(), small.size());
  advise_huge_pages(small.data(), 0);
  EXPECT_EQ(std::count(small.begin(), small.end(), 5), 1000);
  AlignedAllocation block = allocate_aligned(8 * MiB + 123);
  ASSERT_NE(block.data, nullptr);
  std::memset(block.data.get(), 9, 4096);
  advise_huge_pages(block.data.get() + 17, block.capacity - 17);
  EXPECT_EQ(block.data.get()[0], 9);
  EXPECT_EQ(block.data.get()[4095], 9);
  std::memset(block.data.get(), 3, block.capacity);
  EXPECT_EQ(block.data.get()[block.capacity - 1], 3);
}

TEST(AlignedAllocation, PopulatedPagesAreResidentWithTheirBytesUnchanged) {
  populate_pages(nullptr, 10);
  std::vector<uint8_t> small(1000, 5);
  populate_pages(small.data() + 1, small.size() - 1);
  EXPECT_EQ(std::count(small.begin(), small.end(), 5), 1000);
  AlignedAllocation block = allocate_aligned(32 * MiB, Fill::kZero);
  ASSERT_NE(block.data, nullptr);
  uint8_t* data = block.data.get();
  // Bytes written at both ends of the range, and one past each end.
  const size_t from = 5 * MiB + 100, to = 13 * MiB + 7;
  for (size_t at : {from - 1, from, to - 1, to}) data[at] = static_cast<uint8_t>(at % 251 + 1);
  const size_t before = block_resident_bytes(data, 32 * MiB);
  populate_pages(data + from, to - from);
  EXPECT_EQ(block_resident_bytes(data + from, to - from), to - from);
  if (maps_large_blocks()) {
    EXPECT_GT(block_resident_bytes(data, 32 * MiB), before);
  }
  for (size_t at : {from - 1, from, to - 1, to}) EXPECT_EQ(data[at], at % 251 + 1) << at;
  EXPECT_EQ(std::count(data + from + 1, data + to - 1, 0), static_cast<std::ptrdiff_t>(to - from - 2));
}

}  // namespace
}  // namespace etna
