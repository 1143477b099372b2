// Conversions between core values and JavaScript. No runtime logic here.
#pragma once

#include <napi.h>

#include <functional>
#include <optional>

#include "core/io.h"
#include "core/module.h"
#include "core/profile.h"
#include "core/program_info.h"
#include "core/status.h"

namespace etna::addon {

// First byte a typed array views, asked of N-API directly: unlike
// array.ArrayBuffer().Data(), that also works when the memory is a
// SharedArrayBuffer. A SharedArrayBuffer is never detached or freed while a
// view of it is alive.
inline uint8_t* typed_array_bytes(const Napi::TypedArray& array) {
  void* data = nullptr;
  napi_status status = napi_get_typedarray_info(array.Env(), array, nullptr, nullptr, &data, nullptr, nullptr);
  NAPI_THROW_IF_FAILED(array.Env(), status, nullptr);
  return static_cast<uint8_t*>(data);
}

// A JS Error carrying `code` (an EtnaError code); lib/ rewraps it as EtnaError.
Napi::Error make_js_error(Napi::Env env, const Error& error);

// Runs `body`, turning any escaping C++ exception into a thrown INTERNAL error
// so that nothing crosses the N-API boundary as an exception.
Napi::Value guard(Napi::Env env, const std::function<Napi::Value()>& body);

Napi::Object to_js(Napi::Env env, const ValueInfo& info);
Napi::Object to_js(Napi::Env env, const MethodInfo& info);
Napi::Object to_js(Napi::Env env, const ProgramInfo& info);
Napi::Object to_js(Napi::Env env, const MemoryReport& report);

// One call argument: null/undefined (None), boolean, bigint (Int), number
// (Double), string, or a tensor { dtype, shape, data: TypedArray }. A tensor's
// data points into the JS array: use it before returning to JS.
// The value of a JS number that is a whole number from 0 up to (not
// including) `limit`, at most 2^63; nullopt for anything else (NaN, fractions,
// negatives, too large, not a number). Checked before any conversion, which
// past the target's range would be undefined.
std::optional<uint64_t> whole_number_below(const Napi::Value& value, double limit);

Status input_from_js(const Napi::Value& value, uint32_t index, InputValue& out);
// One output destination: an ArrayBuffer or TypedArray, or null for a non-tensor output.
Status output_buffer_from_js(const Napi::Value& value, uint32_t index, OutputBuffer& out,
                             std::vector<Napi::ObjectReference>& keep_alive);
// Results as JS: tensors as { dtype, shape, byteLength }, other kinds as plain values.
Napi::Array outputs_to_js(Napi::Env env, const std::vector<OutputValue>& outputs);
// A profiled call's results: { outputs, profile: [{ name, category, startUs,
// durationUs, depth, index }] } (times in microseconds on ProfileClock).
Napi::Object profiled_outputs_to_js(Napi::Env env, const std::vector<OutputValue>& outputs,
                                    const std::vector<ProfileEvent>& events);
// ProfileClock's time now, in microseconds (the clock of profile events).
double profile_clock_us();

}  // namespace etna::addon
