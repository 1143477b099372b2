#include "convert.h"

#include <exception>

namespace etna::addon {
namespace {

Napi::Value number(Napi::Env env, uint64_t v) { return Napi::Number::New(env, static_cast<double>(v)); }
Napi::Value number(Napi::Env env, int64_t v) { return Napi::Number::New(env, static_cast<double>(v)); }

Napi::Array strings(Napi::Env env, const std::vector<std::string>& items) {
  Napi::Array array = Napi::Array::New(env, items.size());
  for (uint32_t i = 0; i < items.size(); ++i) array.Set(i, Napi::String::New(env, items[i]));
  return array;
}

}  // namespace

Napi::Error make_js_error(Napi::Env env, const Error& error) {
  Napi::Error js = Napi::Error::New(env, error.message);
  js.Set("code", Napi::String::New(env, error_code_name(error.code)));
  return js;
}

Napi::Value guard(Napi::Env env, const std::function<Napi::Value()>& body) {
  try {
    return body();
  } catch (const Napi::Error&) {
    throw;  // already a JS exception; node-addon-api rethrows it into JS
  } catch (const std::bad_alloc&) {
    throw make_js_error(env, Error{ErrorCode::kInternal, "out of memory"});
  } catch (const std::exception& e) {
    throw make_js_error(env, Error{ErrorCode::kInternal, std::string("internal error: ") + e.what()});
  } catch (...) {
    throw make_js_error(env, Error{ErrorCode::kInternal, "internal error"});
  }
}

Napi::Object to_js(Napi::Env env, const ValueInfo& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("kind", info.kind);
  if (info.kind == "tensor") {
    out.Set("dtype", info.dtype);
    Napi::Array shape = Napi::Array::New(env, info.shape.size());
    for (uint32_t i = 0; i < info.shape.size(); ++i) shape.Set(i, number(env, info.shape[i]));
    out.Set("shape", shape);
    out.Set("dynamism", info.dynamism);
    out.Set("planned", Napi::Boolean::New(env, info.planned));
    out.Set("nbytes", number(env, info.nbytes));
    if (info.memory_id) {
      out.Set("memoryId", number(env, uint64_t{*info.memory_id}));
      out.Set("memoryOffset", number(env, info.memory_offset));
    }
  }
  return out;
}

Napi::Object to_js(Napi::Env env, const MethodInfo& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("name", info.name);
  Napi::Array inputs = Napi::Array::New(env, info.inputs.size());
  for (uint32_t i = 0; i < info.inputs.size(); ++i) inputs.Set(i, to_js(env, info.inputs[i]));
  out.Set("inputs", inputs);
  Napi::Array outputs = Napi::Array::New(env, info.outputs.size());
  for (uint32_t i = 0; i < info.outputs.size(); ++i) outputs.Set(i, to_js(env, info.outputs[i]));
  out.Set("outputs", outputs);
  out.Set("operators", strings(env, info.operators));
  out.Set("delegates", strings(env, info.delegates));
  Napi::Object instructions = Napi::Object::New(env);
  for (const auto& [kind, count] : info.instructions) instructions.Set(kind, number(env, count));
  out.Set("instructions", instructions);
  Napi::Array plan = Napi::Array::New(env, info.memory_plan.size());
  for (uint32_t i = 0; i < info.memory_plan.size(); ++i) plan.Set(i, number(env, info.memory_plan[i]));
  out.Set("memoryPlan", plan);
  out.Set("constantBytes", number(env, info.constant_bytes));
  return out;
}

Napi::Object to_js(Napi::Env env, const ProgramInfo& info) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("identifier", info.identifier);
  if (info.extended_header) {
    Napi::Object header = Napi::Object::New(env);
    header.Set("headerLength", number(env, uint64_t{info.extended_header->header_length}));
    header.Set("programSize", number(env, info.extended_header->program_size));
    header.Set("segmentBaseOffset", number(env, info.extended_header->segment_base_offset));
    if (info.extended_header->segment_data_size) {
      header.Set("segmentDataSize", number(env, *info.extended_header->segment_data_size));
    }
    out.Set("extendedHeader", header);
  } else {
    out.Set("extendedHeader", env.Null());
  }
  out.Set("segments", number(env, info.segments));
  out.Set("namedDataKeys", number(env, info.named_data_keys));
  Napi::Array delegates = Napi::Array::New(env, info.delegates.size());
  for (uint32_t i = 0; i < info.delegates.size(); ++i) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("id", info.delegates[i].id);
    d.Set("location", info.delegates[i].location);
    d.Set("bytes", number(env, info.delegates[i].bytes));
    delegates.Set(i, d);
  }
  out.Set("delegates", delegates);
  Napi::Array methods = Napi::Array::New(env, info.methods.size());
  for (uint32_t i = 0; i < info.methods.size(); ++i) methods.Set(i, to_js(env, info.methods[i]));
  out.Set("methods", methods);
  return out;
}

}  // namespace etna::addon
