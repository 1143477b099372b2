#include "core/kernel.h"

#include <algorithm>
#include <mutex>

namespace etna {
namespace {

struct GlobalKernels {
  std::mutex mutex;
  KernelRegistry registry;
  std::vector<void (*)(KernelRegistry&)> added;  // each library's `add` runs once
};

GlobalKernels& global_kernels() {
  static GlobalKernels global;
  return global;
}

}  // namespace

void KernelRegistry::add(std::string key, KernelFn fn, int arity) { entries_[std::move(key)] = KernelEntry{fn, arity}; }

const KernelEntry* KernelRegistry::find(std::string_view key) const {
  auto it = entries_.find(std::string(key));
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(key);
  return out;
}

const KernelRegistry& kernel_registry() { return global_kernels().registry; }

void register_kernels(void (*add)(KernelRegistry& registry)) {
  GlobalKernels& global = global_kernels();
  std::lock_guard<std::mutex> lock(global.mutex);
  if (std::find(global.added.begin(), global.added.end(), add) != global.added.end()) return;
  add(global.registry);
  global.added.push_back(add);
}

}  // namespace etna
