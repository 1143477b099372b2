#include "backends/xnnpack/xnnpack_backend.h"
#include "core/backend.h"

namespace etna {

const Backend* find_backend(std::string_view id) {
  if (id == xnnpack_backend().id()) return &xnnpack_backend();
  return nullptr;
}

}  // namespace etna
