// Native memory that a JS object keeps alive, told to V8 so that its garbage
// collector weighs it: a program or module its user forgot to dispose() is
// collected as the memory behind such handles grows, not only once the JS
// heap fills (V8 sees nothing of native allocations otherwise).
#pragma once

#include <napi.h>

#include <cstdint>

namespace etna::addon {

class ExternalMemory {
 public:
  // Reports `bytes` as what the object holds now (V8 gets the change since
  // the last report). Nothing once released.
  void report(Napi::Env env, uint64_t bytes) {
    if (released_ || bytes == reported_) return;
    Napi::MemoryManagement::AdjustExternalMemory(env, static_cast<int64_t>(bytes) - static_cast<int64_t>(reported_));
    reported_ = bytes;
  }
  // Takes back all that was reported, once: dispose() or the finalizer,
  // whichever comes first.
  void release(Napi::Env env) {
    report(env, 0);
    released_ = true;
  }
  bool released() const { return released_; }

 private:
  uint64_t reported_ = 0;
  bool released_ = false;
};

}  // namespace etna::addon
