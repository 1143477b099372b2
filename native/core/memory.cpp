#include "memory.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace etna {

Result<std::shared_ptr<Arena>> Arena::allocate(size_t bytes) {
  // Never a zero-byte allocation: every arena has a valid base pointer. The
  // block has room to align the start and round the end up to the alignment.
  if (bytes > SIZE_MAX - 2 * kAllocationAlignment) {
    return make_error(ErrorCode::kInternal, "arena size " + std::to_string(bytes) + " overflows");
  }
  const size_t rounded = (bytes == 0 ? 1 : (bytes - 1) / kAllocationAlignment + 1) * kAllocationAlignment;
  std::unique_ptr<uint8_t, AlignedFree> block(
      static_cast<uint8_t*>(std::calloc(rounded + kAllocationAlignment - 1, 1)));
  if (!block) {
    return make_error(ErrorCode::kInternal, "out of memory allocating a " + std::to_string(bytes) + "-byte arena");
  }
  const auto address = reinterpret_cast<uintptr_t>(block.get());
  const size_t skip = (kAllocationAlignment - address % kAllocationAlignment) % kAllocationAlignment;
  uint8_t* data = block.get() + skip;
  return std::shared_ptr<Arena>(new Arena(std::move(block), data, bytes));
}

}  // namespace etna
