#include "backends/xnnpack/memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace etna::xnn {

BufferPlacement place_buffers(const std::vector<BufferLifetime>& buffers) {
  BufferPlacement placement;
  placement.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });

  std::vector<size_t> placed;
  struct Busy {
    size_t begin, end;
  };
  std::vector<Busy> busy;
  for (size_t index : order) {
    const BufferLifetime& buffer = buffers[index];
    const size_t bytes = round_up(buffer.bytes, kWorkspaceAlignment);
    busy.clear();
    for (size_t other : placed) {
      const BufferLifetime& o = buffers[other];
      if (o.first <= buffer.last && buffer.first <= o.last) {
        busy.push_back({placement.offsets[other], placement.offsets[other] + round_up(o.bytes, kWorkspaceAlignment)});
      }
    }
    std::sort(busy.begin(), busy.end(), [](const Busy& a, const Busy& b) { return a.begin < b.begin; });
    // Smallest gap that fits; past the last busy range when none does.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const Busy& range : busy) {
      if (range.begin >= cursor + bytes && range.begin - cursor < best_gap) {
        best = cursor;
        best_gap = range.begin - cursor;
      }
      cursor = std::max(cursor, range.end);
    }
    if (best == SIZE_MAX) best = cursor;
    placement.offsets[index] = best;
    placement.total_bytes = std::max(placement.total_bytes, best + bytes);
    placed.push_back(index);
  }
  return placement;
}

}  // namespace etna::xnn
