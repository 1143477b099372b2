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

struct KernelDescriptor;

// The arguments of one KernelCall, in the serialized order: schema arguments
// (defaults materialized), out arguments, then one return slot (pte spec 5.4).
// Built for every call, so it stays a few words.
struct KernelArgs {
  EValue* const* values;
  size_t count;
  // The kernel being called: its name is what the kernel's messages name.
  const KernelDescriptor* kernel = nullptr;
  // The call's thread pool; null runs everything on the calling thread.
  // Kernels split their work over it with core/parallel.h.
  pthreadpool_t pool = nullptr;
  EValue& operator[](size_t i) const { return *values[i]; }
  size_t size() const { return count; }
};

// Returns an error naming what is wrong with the arguments (the executor adds
// the method and instruction); never throws, never reads out of bounds.
using KernelFn = Status (*)(KernelArgs args);

// One kernel, written once where it is registered.
struct KernelDescriptor {
  std::string_view name;  // the operator key, "namespace::op.overload"
  int arity = -1;         // exact argument count including the return slot; -1 = variadic, checked by the kernel
  KernelFn fn = nullptr;
};

// INVALID_PROGRAM naming the operator when a kernel of exact arity is called
// with another number of arguments. The executor checks every KernelCall
// with it at load, so kernels of exact arity need not count their arguments.
Status check_arity(const KernelDescriptor& kernel, size_t count);

class KernelRegistry {
 public:
  KernelRegistry() = default;
  // The descriptors' names view the registry's own keys.
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // Adds `kernel` under its name, replacing a kernel of the same name.
  void add(const KernelDescriptor& kernel);
  const KernelDescriptor* find(std::string_view key) const;
  std::vector<std::string> keys() const;

 private:
  std::unordered_map<std::string, KernelDescriptor> entries_;
};

// The process-wide registry the executor resolves KernelCalls in; empty until
// a kernel library registers into it.
const KernelRegistry& kernel_registry();

// Lets `add` put its kernels into the process-wide registry. Serialised, and
// once per `add`: the addon's init runs again in every worker thread, and a
// second run must not rewrite entries that loaded methods are reading.
void register_kernels(void (*add)(KernelRegistry& registry));

}  // namespace etna
