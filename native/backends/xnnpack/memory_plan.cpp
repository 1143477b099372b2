#include "backends/xnnpack/memory_plan.h"

#include <algorithm>
#include <cstdint>

namespace etna::xnn {

namespace {

// The buffer whose bytes `index` is (itself unless a view). A cycle, which
// callers never make, ends the walk rather than looping.
size_t owner_of(const std::vector<BufferLifetime>& buffers, size_t index) {
  for (size_t steps = 0; steps < buffers.size(); ++steps) {
    const size_t next = buffers[index].view_of;
    if (next == kOwnBytes || next >= buffers.size()) break;
    index = next;
  }
  return index;
}

}  // namespace

BufferPlacement place_buffers(const std::vector<BufferLifetime>& buffers) {
  BufferPlacement placement;
  placement.offsets.assign(buffers.size(), 0);

  // Each owner stands for itself and its views: the largest size, the union of lifetimes.
  std::vector<size_t> owner(buffers.size());
  std::vector<BufferLifetime> merged = buffers;
  for (size_t i = 0; i < buffers.size(); ++i) {
    owner[i] = owner_of(buffers, i);
    BufferLifetime& group = merged[owner[i]];
    group.bytes = std::max(group.bytes, buffers[i].bytes);
    group.first = std::min(group.first, buffers[i].first);
    group.last = std::max(group.last, buffers[i].last);
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (owner[i] == i) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return merged[a].bytes > merged[b].bytes; });

  std::vector<size_t> placed;
  struct Busy {
    size_t begin, end;
  };
  std::vector<Busy> busy;
  for (size_t index : order) {
    const BufferLifetime& buffer = merged[index];
    const size_t bytes = round_up(buffer.bytes, kWorkspaceAlignment);
    busy.clear();
    for (size_t other : placed) {
      const BufferLifetime& o = merged[other];
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
  for (size_t i = 0; i < buffers.size(); ++i) placement.offsets[i] = placement.offsets[owner[i]];
  return placement;
}

}  // namespace etna::xnn
