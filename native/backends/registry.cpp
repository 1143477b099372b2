#include "backends/registry.h"

#include "backends/xnnpack/xnnpack_backend.h"
#include "core/backend.h"

namespace etna::backends {

void register_xnnpack_backend() { register_backend(xnnpack_backend()); }

}  // namespace etna::backends
