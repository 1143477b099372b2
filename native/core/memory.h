// Planned memory: zero-filled, aligned arenas that a Module owns, and the
// per-method view of them (one base pointer per mem_id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "aligned.h"
#include "status.h"

namespace etna {

// One zero-filled allocation, 64-byte aligned (XNNPACK and vector kernels
// read past nothing but like aligned rows).
class Arena {
 public:
  static Result<std::shared_ptr<Arena>> allocate(size_t bytes);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  Arena(std::unique_ptr<uint8_t, AlignedFree> data, size_t size) : data_(std::move(data)), size_(size) {}
  std::unique_ptr<uint8_t, AlignedFree> data_;
  size_t size_;
};

// The arenas one method sees: arenas[k] serves mem_id k + 1. An entry may be
// shared with other methods of the same Module.
struct MethodMemory {
  std::vector<std::shared_ptr<Arena>> arenas;
};

}  // namespace etna
