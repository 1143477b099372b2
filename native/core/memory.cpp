#include "memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace etna {

namespace {
constexpr size_t kArenaAlignment = 64;
}

Result<std::shared_ptr<Arena>> Arena::allocate(size_t bytes) {
  const size_t rounded = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  if (rounded < bytes) return make_error(ErrorCode::kInternal, "arena size " + std::to_string(bytes) + " overflows");
  // Never a zero-byte allocation: every arena has a valid base pointer.
  const size_t allocation = rounded == 0 ? kArenaAlignment : rounded;
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(kArenaAlignment, allocation));
  if (data == nullptr) {
    return make_error(ErrorCode::kInternal, "out of memory allocating a " + std::to_string(bytes) + "-byte arena");
  }
  std::memset(data, 0, allocation);
  return std::shared_ptr<Arena>(new Arena(data, bytes));
}

Arena::~Arena() { std::free(data_); }

}  // namespace etna
