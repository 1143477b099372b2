// Conversions between core values and JavaScript. No runtime logic here.
#pragma once

#include <napi.h>

#include <functional>

#include "core/program_info.h"
#include "core/status.h"

namespace etna::addon {

// A JS Error carrying `code` (an EtnaError code); lib/ rewraps it as EtnaError.
Napi::Error make_js_error(Napi::Env env, const Error& error);

// Runs `body`, turning any escaping C++ exception into a thrown INTERNAL error
// so that nothing crosses the N-API boundary as an exception.
Napi::Value guard(Napi::Env env, const std::function<Napi::Value()>& body);

Napi::Object to_js(Napi::Env env, const ValueInfo& info);
Napi::Object to_js(Napi::Env env, const MethodInfo& info);
Napi::Object to_js(Napi::Env env, const ProgramInfo& info);

}  // namespace etna::addon
