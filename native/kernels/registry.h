// The portable kernels (aten operators and prim ops) as one kernel library.
#pragma once

#include "core/kernel.h"

namespace etna::kernels {

// Adds every portable kernel to `registry`.
void add_portable_kernels(KernelRegistry& registry);

// Adds them to the runtime's registry (core kernel_registry()); call before
// the first method loads. Later calls do nothing.
void register_portable_kernels();

}  // namespace etna::kernels
