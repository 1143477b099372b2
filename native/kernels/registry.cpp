#include "core/kernel.h"

namespace etna {

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

const KernelRegistry& kernel_registry() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    return r;
  }();
  return registry;
}

}  // namespace etna
