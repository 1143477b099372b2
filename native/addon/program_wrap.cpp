#include "program_wrap.h"

#include "addon_data.h"
#include "convert.h"
#include "core/program_info.h"

namespace etna::addon {

using ProgramHolder = std::shared_ptr<const Program>;

void ProgramWrap::init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DefineClass(env, "NativeProgram",
                                    {
                                        InstanceMethod<&ProgramWrap::describe>("describe"),
                                        InstanceAccessor<&ProgramWrap::file_size>("fileSize"),
                                        InstanceMethod<&ProgramWrap::dispose>("dispose"),
                                    });
  addon_data(env).program_constructor = Napi::Persistent(ctor);
  exports.Set("NativeProgram", ctor);
}

ProgramWrap::ProgramWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ProgramWrap>(info) {
  Napi::Env env = info.Env();
  guard(env, [&]() -> Napi::Value {
    if (info.Length() >= 1 && info[0].IsExternal()) {
      // Taken, not copied: the external lives until a garbage collection, and
      // a copy there would keep the program alive after dispose().
      program_ = std::move(*info[0].As<Napi::External<ProgramHolder>>().Data());
      external_memory_.report(env, program_->owned_bytes());
      return env.Undefined();
    }
    Result<ProgramHolder> loaded =
        make_error(ErrorCode::kInvalidInput, "NativeProgram expects a file path, an ArrayBuffer or a view of one");
    if (info.Length() >= 1 && info[0].IsString()) {
      const bool map = info.Length() >= 2 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
      loaded = Program::load_file(info[0].As<Napi::String>().Utf8Value(), map ? FileAccess::kMap : FileAccess::kCopy);
    } else if (auto bytes = info.Length() >= 1 ? view_bytes(info[0]) : std::nullopt) {
      loaded = Program::load_bytes(bytes->data, bytes->size);
    }
    if (!loaded) throw make_js_error(env, loaded.error());
    program_ = std::move(*loaded);
    external_memory_.report(env, program_->owned_bytes());
    return env.Undefined();
  });
}

ProgramWrap::~ProgramWrap() { external_memory_.release(Env()); }

Napi::Object ProgramWrap::wrap(Napi::Env env, ProgramHolder program) {
  auto external = Napi::External<ProgramHolder>::New(env, new ProgramHolder(std::move(program)),
                                                     [](Napi::Env, ProgramHolder* holder) { delete holder; });
  return addon_data(env).program_constructor.New({external});
}

ProgramWrap* ProgramWrap::unwrap(const Napi::Value& value) {
  if (!value.IsObject()) return nullptr;
  Napi::Object object = value.As<Napi::Object>();
  if (!object.InstanceOf(addon_data(value.Env()).program_constructor.Value())) return nullptr;
  return Napi::ObjectWrap<ProgramWrap>::Unwrap(object);
}

const std::shared_ptr<const Program>& ProgramWrap::live_program(Napi::Env env) const {
  if (!program_) throw make_js_error(env, Error{ErrorCode::kDisposed, "program has been disposed"});
  return program_;
}

Napi::Value ProgramWrap::describe(const Napi::CallbackInfo& info) {
  return guard(info.Env(),
               [&]() -> Napi::Value { return to_js(info.Env(), describe_program(*live_program(info.Env()))); });
}

Napi::Value ProgramWrap::file_size(const Napi::CallbackInfo& info) {
  return guard(info.Env(), [&]() -> Napi::Value {
    return Napi::Number::New(info.Env(), static_cast<double>(live_program(info.Env())->file_size()));
  });
}

Napi::Value ProgramWrap::dispose(const Napi::CallbackInfo& info) {
  // Modules and load workers over the program hold their own references.
  program_.reset();
  external_memory_.release(info.Env());
  return info.Env().Undefined();
}

std::optional<ByteSpan> view_bytes(const Napi::Value& value) {
  if (value.IsArrayBuffer()) {
    Napi::ArrayBuffer buffer = value.As<Napi::ArrayBuffer>();
    return ByteSpan{static_cast<const uint8_t*>(buffer.Data()), buffer.ByteLength()};
  }
  // Views ask N-API for their first byte directly: that also works when the
  // memory is a SharedArrayBuffer, which is not an ArrayBuffer to N-API.
  void* data = nullptr;
  size_t length = 0;
  if (value.IsTypedArray()) {
    napi_typedarray_type type;
    if (napi_get_typedarray_info(value.Env(), value, &type, &length, &data, nullptr, nullptr) == napi_ok) {
      return ByteSpan{static_cast<const uint8_t*>(data), value.As<Napi::TypedArray>().ByteLength()};
    }
  }
  if (value.IsDataView()) {
    if (napi_get_dataview_info(value.Env(), value, &length, &data, nullptr, nullptr) == napi_ok) {
      return ByteSpan{static_cast<const uint8_t*>(data), length};
    }
  }
  return std::nullopt;
}

ByteSpan bytes_argument(const Napi::CallbackInfo& info, const std::string& function) {
  std::optional<ByteSpan> bytes = info.Length() >= 1 ? view_bytes(info[0]) : std::nullopt;
  if (!bytes) {
    throw make_js_error(info.Env(),
                        make_error(ErrorCode::kInvalidInput, function + " expects an ArrayBuffer or a view of one"));
  }
  return *bytes;
}

}  // namespace etna::addon
