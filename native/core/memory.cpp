#include "memory.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace etna {

Result<std::shared_ptr<Arena>> Arena::allocate(size_t bytes) {
  // Never a zero-byte allocation: every arena has a valid base pointer.
  AlignedAllocation allocation = allocate_aligned(bytes);
  if (!allocation.data) {
    if (bytes > SIZE_MAX - (kAllocationAlignment - 1)) {
      return make_error(ErrorCode::kInternal, "arena size " + std::to_string(bytes) + " overflows");
    }
    return make_error(ErrorCode::kInternal, "out of memory allocating a " + std::to_string(bytes) + "-byte arena");
  }
  std::memset(allocation.data.get(), 0, allocation.capacity);
  return std::shared_ptr<Arena>(new Arena(std::move(allocation.data), bytes));
}


}  // namespace etna
