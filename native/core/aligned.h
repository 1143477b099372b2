// The one aligned allocator of the runtime: 64-byte-aligned blocks (what
// XNNPACK, FlatBuffers and vector loops want), freed by their owner's RAII.
//
// Large blocks (kMappedBlockMin and more: program copies, arenas, packed
// weights, workspaces) are mapped from the OS one by one and unmapped when
// freed, so disposing a program or a module gives their pages back at once.
// Through malloc they would not be: glibc raises its mmap threshold to the
// size of the largest mapped block freed (up to 32 MiB), after which blocks
// up to that size come from the heap, where a freed block stays resident, and
// an aligned request (memalign asks for the size plus the alignment) does not
// fit the hole a freed block of the same size left; small objects that live
// until a garbage collection keep the holes from merging. Reloading a 16 MiB
// program then took 16 MiB more each time until V8 happened to collect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace etna {

constexpr size_t kAllocationAlignment = 64;
// Blocks this large or larger are mapped on their own.
constexpr size_t kMappedBlockMin = size_t{256} * 1024;

// At least `bytes` aligned to `alignment` (a power of two), or null when out
// of memory; `zeroed` blocks read as zero (a mapped block costs no page until
// it is touched). Free with free_aligned_block only.
void* allocate_aligned_block(size_t bytes, size_t alignment, bool zeroed);
// Frees a block of allocate_aligned_block; null does nothing.
void free_aligned_block(void* data);
// How many of the `bytes` bytes at `data`, inside a block of
// allocate_aligned_block, sit in pages the process has touched: a mapped
// block's untouched pages cost nothing yet (mincore tells which are
// resident); a heap block counts whole.
size_t block_resident_bytes(const void* data, size_t bytes);
// Whether large blocks are mappings of their own: false in builds with
// AddressSanitizer, which watches malloc'd blocks only.
bool maps_large_blocks();
// Asks for huge pages for the whole huge pages inside [data, data + bytes),
// where the system gives them on request: memory not yet touched then fills
// in a few faults. Nothing happens where it cannot.
void advise_huge_pages(void* data, size_t bytes);
// Faults in the pages of [data, data + bytes) for writing and leaves their
// bytes as they are, so that the writes that follow take no page fault: a
// huge page for each huge page the range touches where the block asked for
// them. MADV_POPULATE_WRITE where the kernel has it (Linux 5.14), then a
// read and write back of one byte per page (what faults them in where
// madvise did not); nobody may write the range meanwhile.
void populate_pages(void* data, size_t bytes);

struct AlignedFree {
  void operator()(uint8_t* p) const { free_aligned_block(p); }
};

struct AlignedAllocation {
  std::unique_ptr<uint8_t, AlignedFree> data;  // null when the allocation failed
  size_t capacity = 0;                         // usable bytes: `bytes` rounded up to the alignment
};

enum class Fill { kUninitialised, kZero };

// At least `bytes` (never zero: an empty request still gets one block),
// 64-byte aligned. data is null on failure or when the rounding overflows.
AlignedAllocation allocate_aligned(size_t bytes, Fill fill = Fill::kUninitialised);

}  // namespace etna
