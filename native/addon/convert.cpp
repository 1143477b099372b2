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
  out.Set("name", info.name);
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
  Napi::Array state = Napi::Array::New(env, info.state.size());
  for (uint32_t i = 0; i < info.state.size(); ++i) {
    const StateTensorInfo& tensor = info.state[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("value", number(env, uint64_t{tensor.value}));
    entry.Set("dtype", tensor.dtype);
    Napi::Array shape = Napi::Array::New(env, tensor.shape.size());
    for (uint32_t d = 0; d < tensor.shape.size(); ++d) shape.Set(d, number(env, tensor.shape[d]));
    entry.Set("shape", shape);
    entry.Set("offset", number(env, tensor.offset));
    entry.Set("bytes", number(env, tensor.nbytes));
    if (!tensor.name.empty()) entry.Set("name", tensor.name);
    state.Set(i, entry);
  }
  out.Set("state", state);
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
  Napi::Object constants = Napi::Object::New(env);
  constants.Set("count", number(env, info.constants));
  constants.Set("bytes", number(env, info.constant_bytes));
  out.Set("constants", constants);
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

namespace etna::addon {

Napi::Object to_js(Napi::Env env, const MemoryReport& report) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("mode", report.mode);
  out.Set("reason", report.reason);
  Napi::Array arenas = Napi::Array::New(env, report.arenas.size());
  for (uint32_t i = 0; i < report.arenas.size(); ++i) {
    const ArenaReport& arena = report.arenas[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("memoryId", Napi::Number::New(env, arena.memory_id));
    entry.Set("bytes", Napi::Number::New(env, static_cast<double>(arena.bytes)));
    entry.Set("shared", Napi::Boolean::New(env, arena.shared));
    entry.Set("pooled", Napi::Boolean::New(env, arena.pooled));
    Napi::Array methods = Napi::Array::New(env, arena.methods.size());
    for (uint32_t k = 0; k < arena.methods.size(); ++k) methods.Set(k, arena.methods[k]);
    entry.Set("methods", methods);
    arenas.Set(i, entry);
  }
  out.Set("arenas", arenas);
  out.Set("plannedBytes", Napi::Number::New(env, static_cast<double>(report.planned_bytes)));
  out.Set("unsharedPlannedBytes", Napi::Number::New(env, static_cast<double>(report.unshared_planned_bytes)));
  out.Set("constantBytes", Napi::Number::New(env, static_cast<double>(report.constant_bytes)));
  out.Set("packedWeightBytes", Napi::Number::New(env, static_cast<double>(report.packed_weight_bytes)));
  out.Set("sharedPackedWeightBytes", Napi::Number::New(env, static_cast<double>(report.shared_packed_weight_bytes)));
  out.Set("workspaceBytes", Napi::Number::New(env, static_cast<double>(report.workspace_bytes)));
  out.Set("pooledArenaBytes", Napi::Number::New(env, static_cast<double>(report.pooled_arena_bytes)));
  out.Set("pooledWorkspaceBytes", Napi::Number::New(env, static_cast<double>(report.pooled_workspace_bytes)));
  out.Set("ownedBytes", Napi::Number::New(env, static_cast<double>(report.owned_bytes)));
  out.Set("sharedBytes", Napi::Number::New(env, static_cast<double>(report.shared_bytes)));
  out.Set("untouchedBytes", Napi::Number::New(env, static_cast<double>(report.untouched_bytes)));
  Napi::Array methods = Napi::Array::New(env, report.methods.size());
  for (uint32_t i = 0; i < report.methods.size(); ++i) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("name", report.methods[i].method);
    entry.Set("constantBytes", Napi::Number::New(env, static_cast<double>(report.methods[i].constant_bytes)));
    methods.Set(i, entry);
  }
  out.Set("methods", methods);
  return out;
}

namespace {

Error bad_input(uint32_t index, const std::string& what) {
  return Error{ErrorCode::kInvalidInput, "input " + std::to_string(index) + ": " + what};
}

}  // namespace

std::optional<uint64_t> whole_number_below(const Napi::Value& value, double limit) {
  if (!value.IsNumber()) return std::nullopt;
  const double number = value.As<Napi::Number>().DoubleValue();
  if (!(number >= 0 && number < limit && number < 9223372036854775808.0)) return std::nullopt;
  const auto whole = static_cast<uint64_t>(number);
  if (static_cast<double>(whole) != number) return std::nullopt;
  return whole;
}

Status input_from_js(const Napi::Value& value, uint32_t index, InputValue& out) {
  if (value.IsNull() || value.IsUndefined()) {
    out.kind = InputValue::Kind::kNone;
  } else if (value.IsBoolean()) {
    out.kind = InputValue::Kind::kBool;
    out.bool_value = value.As<Napi::Boolean>().Value();
  } else if (value.IsBigInt()) {
    bool lossless = false;
    out.kind = InputValue::Kind::kInt;
    out.int_value = value.As<Napi::BigInt>().Int64Value(&lossless);
    if (!lossless) return bad_input(index, "integer does not fit in int64");
  } else if (value.IsNumber()) {
    out.kind = InputValue::Kind::kDouble;
    out.double_value = value.As<Napi::Number>().DoubleValue();
  } else if (value.IsString()) {
    out.kind = InputValue::Kind::kString;
    out.string_value = value.As<Napi::String>().Utf8Value();
  } else if (value.IsObject()) {
    Napi::Object object = value.As<Napi::Object>();
    Napi::Value scalar_type = object.Get("scalarType");
    Napi::Value shape = object.Get("shape");
    Napi::Value data = object.Get("data");
    if (!scalar_type.IsNumber() || !shape.IsArray() || !data.IsTypedArray()) {
      return bad_input(index, "a tensor needs scalarType (number), shape (array) and data (TypedArray)");
    }
    const auto code = whole_number_below(scalar_type, 256);
    const auto type = code ? scalar_type_from_code(static_cast<int>(*code)) : std::nullopt;
    if (!type) return bad_input(index, "unknown ScalarType code " + scalar_type.ToString().Utf8Value());
    out.kind = InputValue::Kind::kTensor;
    out.tensor.dtype = *type;
    Napi::Array dims = shape.As<Napi::Array>();
    for (uint32_t d = 0; d < dims.Length(); ++d) {
      Napi::Value dim = dims.Get(d);
      if (!dim.IsNumber()) return bad_input(index, "shape[" + std::to_string(d) + "] is not a number");
      const auto size = whole_number_below(dim, 9223372036854775808.0);
      if (!size) return bad_input(index, "shape[" + std::to_string(d) + "] is not a non-negative integer");
      out.tensor.shape.push_back(static_cast<int64_t>(*size));
    }
    Napi::TypedArray array = data.As<Napi::TypedArray>();
    out.tensor.data = typed_array_bytes(array);
    out.tensor.nbytes = array.ByteLength();
  } else {
    return bad_input(index, "unsupported value (expected a tensor, number, bigint, boolean, string or null)");
  }
  return Status::ok();
}

Status output_buffer_from_js(const Napi::Value& value, uint32_t index, OutputBuffer& out,
                             std::vector<Napi::ObjectReference>& keep_alive) {
  if (value.IsNull() || value.IsUndefined()) return Status::ok();
  if (value.IsArrayBuffer()) {
    Napi::ArrayBuffer buffer = value.As<Napi::ArrayBuffer>();
    out.data = buffer.Data();
    out.capacity = buffer.ByteLength();
  } else if (value.IsTypedArray()) {
    Napi::TypedArray array = value.As<Napi::TypedArray>();
    out.data = typed_array_bytes(array);
    out.capacity = array.ByteLength();
  } else {
    return Error{ErrorCode::kInvalidInput,
                 "output " + std::to_string(index) + ": destination is not an ArrayBuffer or TypedArray"};
  }
  keep_alive.push_back(Napi::Persistent(value.As<Napi::Object>()));
  return Status::ok();
}

Napi::Array outputs_to_js(Napi::Env env, const std::vector<OutputValue>& outputs) {
  Napi::Array array = Napi::Array::New(env, outputs.size());
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    const OutputValue& value = outputs[i];
    switch (value.kind) {
      case OutputValue::Kind::kTensor: {
        Napi::Object tensor = Napi::Object::New(env);
        tensor.Set("scalarType", Napi::Number::New(env, static_cast<int>(value.dtype)));
        Napi::Array shape = Napi::Array::New(env, value.shape.size());
        for (uint32_t d = 0; d < value.shape.size(); ++d)
          shape.Set(d, Napi::Number::New(env, static_cast<double>(value.shape[d])));
        tensor.Set("shape", shape);
        tensor.Set("byteLength", Napi::Number::New(env, static_cast<double>(value.nbytes)));
        array.Set(i, tensor);
        break;
      }
      case OutputValue::Kind::kInt: array.Set(i, Napi::BigInt::New(env, value.int_value)); break;
      case OutputValue::Kind::kDouble: array.Set(i, Napi::Number::New(env, value.double_value)); break;
      case OutputValue::Kind::kBool: array.Set(i, Napi::Boolean::New(env, value.bool_value)); break;
      case OutputValue::Kind::kString: array.Set(i, Napi::String::New(env, value.string_value)); break;
      default: array.Set(i, env.Null()); break;
    }
  }
  return array;
}

namespace {

// Profile times cross to JS in microseconds, the unit of Chrome trace events.
double microseconds(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

Napi::Object profiled_outputs_to_js(Napi::Env env, const std::vector<OutputValue>& outputs,
                                    const std::vector<ProfileEvent>& events) {
  Napi::Array profile = Napi::Array::New(env, events.size());
  for (uint32_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& event = events[i];
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("name", event.name);
    entry.Set("category", profile_category_name(event.category));
    entry.Set("startUs", Napi::Number::New(env, microseconds(event.start_ns)));
    entry.Set("durationUs", Napi::Number::New(env, microseconds(event.duration_ns)));
    entry.Set("depth", Napi::Number::New(env, event.depth));
    entry.Set("index", Napi::Number::New(env, static_cast<double>(event.index)));
    profile.Set(i, entry);
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("outputs", outputs_to_js(env, outputs));
  result.Set("profile", profile);
  return result;
}

double profile_clock_us() {
  return microseconds(
      std::chrono::duration_cast<std::chrono::nanoseconds>(ProfileClock::now().time_since_epoch()).count());
}

}  // namespace etna::addon
