// Planned memory: zero-filled, aligned arenas that a Module owns, and the
// per-method view of them (one base pointer per mem_id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "aligned.h"
#include "status.h"

namespace etna {

// One zero-filled allocation, 64-byte aligned (XNNPACK and vector kernels
// read past nothing but like aligned rows). A large arena is a mapping of its
// own (aligned.h), so it costs no page until it is touched (loading a module
// does not fault in its whole state arena) and its pages go back to the OS
// when it is freed.
class Arena {
 public:
  static Result<std::shared_ptr<Arena>> allocate(size_t bytes);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  uint8_t* data() const { return block_.get(); }
  size_t size() const { return size_; }
  // The bytes in pages touched so far (block_resident_bytes in aligned.h).
  size_t resident_bytes() const { return block_resident_bytes(data(), size_); }

 private:
  Arena(std::unique_ptr<uint8_t, AlignedFree> block, size_t size) : block_(std::move(block)), size_(size) {}
  std::unique_ptr<uint8_t, AlignedFree> block_;
  size_t size_;
};

// The arenas one method sees: arenas[k] serves mem_id k + 1. An entry may be
// shared with other methods of the same Module.
struct MethodMemory {
  std::vector<std::shared_ptr<Arena>> arenas;
};

// Scratch that holds nothing from one call to the next, lent to one call at a
// time: whoever borrows an item has it alone until its Lease ends, then the
// item waits, free, for the next borrower. So the pool holds as many items as
// calls were ever in flight at once, not one per user. The pool must outlive
// its leases. Thread-safe.
template <typename T>
class LendingPool {
 public:
  class Lease {
   public:
    Lease() = default;
    // An item of the holder's own, lent by no pool (kept when the lease ends).
    explicit Lease(std::shared_ptr<T> own) : item_(std::move(own)) {}
    Lease(Lease&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), item_(std::move(other.item_)) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        give_back();
        pool_ = std::exchange(other.pool_, nullptr);
        item_ = std::move(other.item_);
      }
      return *this;
    }
    ~Lease() { give_back(); }
    T* get() const { return item_.get(); }
    T* operator->() const { return item_.get(); }
    const std::shared_ptr<T>& shared() const { return item_; }
    explicit operator bool() const { return item_ != nullptr; }

   private:
    friend class LendingPool;
    Lease(LendingPool* pool, std::shared_ptr<T> item) : pool_(pool), item_(std::move(item)) {}
    void give_back() {
      if (pool_ && item_) pool_->give_back(std::move(item_));
      pool_ = nullptr;
      item_.reset();
    }
    LendingPool* pool_ = nullptr;
    std::shared_ptr<T> item_;
  };

  // A free item for which `fits(item)` holds (the most recently returned
  // first, as its pages are the likeliest to be resident), else `make()`'s
  // (a Result<std::shared_ptr<T>>), made outside the lock.
  template <typename Fits, typename Make>
  auto borrow(Fits fits, Make make) -> Result<Lease> {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = free_.size(); i-- > 0;) {
        if (!fits(*free_[i])) continue;
        std::shared_ptr<T> item = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        ++lent_;
        return Lease(this, std::move(item));
      }
    }
    auto made = make();
    if (!made) return made.error();
    std::lock_guard<std::mutex> lock(mutex_);
    all_.push_back(*made);
    ++lent_;
    return Lease(this, std::move(*made));
  }

  // Calls `visit(const T&)` for every item the pool made, lent or free.
  template <typename Visit>
  void for_each(Visit visit) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& item : all_) visit(*item);
  }
  size_t lent() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lent_;
  }

 private:
  void give_back(std::shared_ptr<T> item) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(item));
    --lent_;
  }

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<T>> free_;
  std::vector<std::shared_ptr<T>> all_;
  size_t lent_ = 0;
};

// The activation arenas (mem_id 1) of one Program's modules that borrow them
// per call (Module: pooled activations).
using ArenaPool = LendingPool<Arena>;

}  // namespace etna
