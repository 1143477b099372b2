// Offsets of a delegate's intermediate buffers inside its workspace: buffers
// whose lifetimes (node index ranges) overlap never share bytes; others may.
#pragma once

#include <cstddef>
#include <vector>

namespace etna::xnn {

constexpr size_t kWorkspaceAlignment = 64;

struct BufferLifetime {
  size_t bytes = 0;  // already padded by the caller
  size_t first = 0;  // first node that touches the buffer
  size_t last = 0;   // last node that touches it (inclusive)
};

struct BufferPlacement {
  std::vector<size_t> offsets;  // one per BufferLifetime, multiples of kWorkspaceAlignment
  size_t total_bytes = 0;
};

// Greedy best-fit by decreasing size, the classic arena planner.
BufferPlacement place_buffers(const std::vector<BufferLifetime>& buffers);

inline size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace etna::xnn
