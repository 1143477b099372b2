// Offsets of a delegate's intermediate buffers inside its workspace: buffers
// whose lifetimes (node index ranges) overlap never share bytes; others may.
// A buffer may also be declared a view of another (a reshape's output is its
// input's bytes): both get one offset, kept for the union of their lifetimes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace etna::xnn {

constexpr size_t kWorkspaceAlignment = 64;
constexpr size_t kOwnBytes = SIZE_MAX;

struct BufferLifetime {
  size_t bytes = 0;  // already padded by the caller
  size_t first = 0;  // first node that touches the buffer
  size_t last = 0;   // last node that touches it (inclusive)
  // Index of the buffer whose bytes this one is, or kOwnBytes. Views must not
  // form cycles; a view of a view shares the first one's bytes.
  size_t view_of = kOwnBytes;
};

struct BufferPlacement {
  std::vector<size_t> offsets;  // one per BufferLifetime, multiples of kWorkspaceAlignment
  size_t total_bytes = 0;
};

// Greedy best-fit by decreasing size, the classic arena planner; a buffer and
// its views are placed as one.
BufferPlacement place_buffers(const std::vector<BufferLifetime>& buffers);

inline size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace etna::xnn
