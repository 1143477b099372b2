// The delegate backends etna ships, as one backend library.
#pragma once

namespace etna::backends {

// Adds XnnpackBackend to the runtime's backend registry (core
// find_backend()); call before the first method loads. Later calls do nothing.
void register_xnnpack_backend();

}  // namespace etna::backends
