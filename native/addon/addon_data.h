// Per-environment addon state (one per main thread or worker thread).
#pragma once

#include <napi.h>

#include "call_runner.h"

namespace etna::addon {

struct AddonData {
  Napi::FunctionReference program_constructor;
  Napi::FunctionReference module_constructor;
  CallRunner* call_runner = nullptr;  // freed by its own finalizer at environment teardown
};

inline AddonData& addon_data(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

}  // namespace etna::addon
