// Per-environment addon state (one per main thread or worker thread).
#pragma once

#include <napi.h>

namespace etna::addon {

struct AddonData {
  Napi::FunctionReference program_constructor;
  Napi::FunctionReference module_constructor;
};

inline AddonData& addon_data(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

}  // namespace etna::addon
