// Operator kernels: the signature every kernel has, and the registry that
// maps "namespace::op.overload" to a kernel. The runtime owns the registry;
// kernel libraries add to it (kernels::register_portable_kernels) before the
// first method loads.
#pragma once

#include <pthreadpool.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "evalue.h"
#include "status.h"

namespace etna {

// The arguments of one KernelCall, in the serialized order: schema arguments
// (defaults materialized), out arguments, then one return slot (pte spec 5.4).
struct KernelArgs {
  EValue* const* values;
  size_t count;
  // The call's thread pool; null runs everything on the calling thread.
  // Kernels split their work over it with core/parallel.h.
  pthreadpool_t pool = nullptr;
  EValue& operator[](size_t i) const { return *values[i]; }
  size_t size() const { return count; }
};

// Returns an error naming what is wrong with the arguments (the executor adds
// the method and instruction); never throws, never reads out of bounds.
using KernelFn = Status (*)(KernelArgs args);

struct KernelEntry {
  KernelFn fn = nullptr;
  int arity = -1;  // exact argument count including the return slot; -1 = checked by the kernel
};

class KernelRegistry {
 public:
  void add(std::string key, KernelFn fn, int arity);
  const KernelEntry* find(std::string_view key) const;
  std::vector<std::string> keys() const;

 private:
  std::unordered_map<std::string, KernelEntry> entries_;
};

// The process-wide registry the executor resolves KernelCalls in; empty until
// a kernel library registers into it.
const KernelRegistry& kernel_registry();

// Lets `add` put its kernels into the process-wide registry. Serialised, and
// once per `add`: the addon's init runs again in every worker thread, and a
// second run must not rewrite entries that loaded methods are reading.
void register_kernels(void (*add)(KernelRegistry& registry));

}  // namespace etna
