#include "aligned.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace etna {
namespace {

// AddressSanitizer watches malloc'd blocks, not mappings: sanitized builds
// take every block from malloc so that it keeps watching them.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMapLargeBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMapLargeBlocks = false;
#else
constexpr bool kMapLargeBlocks = true;
#endif
#else
constexpr bool kMapLargeBlocks = true;
#endif

// Stored just below each block's first byte: where the allocation begins and,
// for a mapping, its length (zero for malloc).
struct BlockHeader {
  void* base;
  size_t mapped_length;
};

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// The huge page size of x86-64 and of arm64 with 4 KiB pages.
constexpr size_t kHugePage = size_t{2} * 1024 * 1024;

// A fresh mapping of `length` bytes (a multiple of the page size), or null.
// A block of at least a huge page starts on a huge page boundary and asks for
// huge pages where the system gives them on request (transparent_hugepage
// "madvise"). Writing a fresh block then takes a few faults instead of one
// per 4 KiB page, and on virtual machines those faults cost far more than the
// writes: filling 36 MiB of fresh small pages took about 130 ms against 5 ms
// with huge pages. That is most of what loading a program, the first call of
// a module and restoring a state snapshot cost. A sparsely touched arena pays
// for it with up to a huge page resident per region touched.
void* map_block(size_t length) {
  const bool huge = length >= kHugePage;
  const size_t reserved = huge ? length + kHugePage : length;
  void* mapped = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  if (!huge) return mapped;
  auto* start = static_cast<uint8_t*>(mapped);
  auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(start) + kHugePage - 1) & ~(kHugePage - 1));
  if (base > start) munmap(start, static_cast<size_t>(base - start));
  const size_t tail = static_cast<size_t>(start + reserved - (base + length));
  if (tail > 0) munmap(base + length, tail);
  advise_huge_pages(base, length);
  return base;
}

// The first address at or after `base + sizeof(BlockHeader)` aligned to
// `alignment`, with the header written below it.
void* place(void* base, size_t alignment, size_t mapped_length) {
  const uintptr_t after_header = reinterpret_cast<uintptr_t>(base) + sizeof(BlockHeader);
  const uintptr_t data = (after_header + alignment - 1) & ~(uintptr_t{alignment} - 1);
  const BlockHeader header{base, mapped_length};
  std::memcpy(reinterpret_cast<void*>(data - sizeof(BlockHeader)), &header, sizeof(header));
  return reinterpret_cast<void*>(data);
}

}  // namespace

void* allocate_aligned_block(size_t bytes, size_t alignment, bool zeroed) {
  if (alignment < alignof(BlockHeader)) alignment = alignof(BlockHeader);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  const size_t slack = sizeof(BlockHeader) + alignment - 1;
  if (bytes > SIZE_MAX - slack - page_size()) return nullptr;
  const size_t total = bytes + slack;
  if (kMapLargeBlocks && bytes >= kMappedBlockMin) {
    const size_t length = (total + page_size() - 1) / page_size() * page_size();
    void* base = map_block(length);
    if (base == nullptr) return nullptr;
    return place(base, alignment, length);  // anonymous pages read as zero
  }
  void* base = zeroed ? std::calloc(total, 1) : std::malloc(total);
  if (base == nullptr) return nullptr;
  return place(base, alignment, 0);
}

void free_aligned_block(void* data) {
  if (data == nullptr) return;
  BlockHeader header;
  std::memcpy(&header, static_cast<uint8_t*>(data) - sizeof(BlockHeader), sizeof(header));
  if (header.mapped_length != 0) {
    munmap(header.base, header.mapped_length);
  } else {
    std::free(header.base);
  }
}

size_t block_resident_bytes(const void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return 0;
  BlockHeader header;
  std::memcpy(&header, static_cast<const uint8_t*>(data) - sizeof(BlockHeader), sizeof(header));
  if (header.mapped_length == 0) return bytes;
  const uintptr_t page = page_size();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
  std::vector<unsigned char> pages((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, pages.data()) != 0) return bytes;
  size_t resident = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    if ((pages[i] & 1) == 0) continue;
    // The part of page i inside [data, data + bytes).
    const uintptr_t from = std::max(begin + i * page, reinterpret_cast<uintptr_t>(data));
    const uintptr_t to = std::min(begin + (i + 1) * page, end);
    resident += static_cast<size_t>(to - from);
  }
  return resident;
}

bool maps_large_blocks() { return kMapLargeBlocks; }

void advise_huge_pages(void* data, size_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

void populate_pages(void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return;
  const uintptr_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(data);
  const uintptr_t end = first + bytes;
#ifdef MADV_POPULATE_WRITE
  // The kernel's way faults the range in one call. It is still followed by
  // the touch below, cheap over resident pages: an emulator (QEMU's user
  // mode) answers every madvise with success and does nothing.
  const uintptr_t begin = first & ~(page - 1);
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
  for (uintptr_t at = first; at < end; at = (at & ~(page - 1)) + page) {
    volatile uint8_t* byte = reinterpret_cast<volatile uint8_t*>(at);
    *byte = *byte;
  }
}

AlignedAllocation allocate_aligned(size_t bytes, Fill fill) {
  AlignedAllocation out;
  const size_t blocks = bytes == 0 ? 1 : (bytes - 1) / kAllocationAlignment + 1;
  if (blocks > SIZE_MAX / kAllocationAlignment) return out;
  const size_t capacity = blocks * kAllocationAlignment;
  out.data.reset(static_cast<uint8_t*>(allocate_aligned_block(capacity, kAllocationAlignment, fill == Fill::kZero)));
  if (out.data) out.capacity = capacity;
  return out;
}

}  // namespace etna
