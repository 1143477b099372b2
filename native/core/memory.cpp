#include "memory.h"

#include <string>
#include <utility>

namespace etna {

Result<std::shared_ptr<Arena>> Arena::allocate(size_t bytes) {
  // Never a zero-byte allocation: every arena has a valid base pointer.
  AlignedAllocation block = allocate_aligned(bytes, Fill::kZero);
  if (!block.data) {
    return make_error(ErrorCode::kInternal, "out of memory allocating a " + std::to_string(bytes) + "-byte arena");
  }
  return std::shared_ptr<Arena>(new Arena(std::move(block.data), bytes));
}

}  // namespace etna
