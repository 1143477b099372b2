#include "core/backend.h"

#include <mutex>

namespace etna {
namespace {

struct GlobalBackends {
  std::mutex mutex;
  std::vector<const Backend*> backends;  // registration order
};

GlobalBackends& global_backends() {
  static GlobalBackends global;
  return global;
}

}  // namespace

void register_backend(const Backend& backend) {
  GlobalBackends& global = global_backends();
  std::lock_guard<std::mutex> lock(global.mutex);
  for (const Backend* existing : global.backends) {
    if (existing->id() == backend.id()) return;
  }
  global.backends.push_back(&backend);
}

const Backend* find_backend(std::string_view id) {
  GlobalBackends& global = global_backends();
  std::lock_guard<std::mutex> lock(global.mutex);
  for (const Backend* backend : global.backends) {
    if (backend->id() == id) return backend;
  }
  return nullptr;
}

std::string registered_backend_ids() {
  GlobalBackends& global = global_backends();
  std::lock_guard<std::mutex> lock(global.mutex);
  std::string ids;
  for (const Backend* backend : global.backends) ids += (ids.empty() ? "" : ", ") + std::string(backend->id());
  return ids.empty() ? "none" : ids;
}

}  // namespace etna
