// The one aligned allocator of the runtime: 64-byte-aligned blocks (what
// XNNPACK, FlatBuffers and vector loops want), freed by their owner's RAII.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace etna {

constexpr size_t kAllocationAlignment = 64;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct AlignedAllocation {
  std::unique_ptr<uint8_t, AlignedFree> data;  // null when the allocation failed
  size_t capacity = 0;                         // usable bytes: `bytes` rounded up to the alignment
};

// At least `bytes` (never zero: an empty request still gets one block).
// Uninitialised; data is null on failure or when the rounding overflows.
inline AlignedAllocation allocate_aligned(size_t bytes) {
  AlignedAllocation out;
  const size_t blocks = bytes == 0 ? 1 : (bytes - 1) / kAllocationAlignment + 1;
  if (blocks > SIZE_MAX / kAllocationAlignment) return out;
  const size_t capacity = blocks * kAllocationAlignment;
  out.data.reset(static_cast<uint8_t*>(std::aligned_alloc(kAllocationAlignment, capacity)));
  if (out.data) out.capacity = capacity;
  return out;
}

}  // namespace etna
