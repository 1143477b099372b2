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

Status check_arity(const KernelDescriptor& kernel, size_t count) {
  if (kernel.arity < 0 || static_cast<size_t>(kernel.arity) == count) return Status::ok();
  return make_error(ErrorCode::kInvalidProgram, std::string(kernel.name) + " takes " + std::to_string(kernel.arity) +
                                                    " arguments (schema arguments, outs and the return slot); the "
                                                    "call has " +
                                                    std::to_string(count));
}

void KernelRegistry::add(const KernelDescriptor& kernel) {
  const auto entry = entries_.insert_or_assign(std::string(kernel.name), kernel).first;
  entry->second.name = entry->first;  // map nodes stay put, so the view stays valid
}

const KernelDescriptor* KernelRegistry::find(std::string_view key) const {
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
