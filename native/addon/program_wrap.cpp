#include "program_wrap.h"

#include "addon_data.h"
#include "convert.h"
#include "core/program_info.h"

namespace etna::addon {

void ProgramWrap::init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DefineClass(env, "NativeProgram",
                                    {
                                        InstanceMethod<&ProgramWrap::describe>("describe"),
                                        InstanceAccessor<&ProgramWrap::file_size>("fileSize"),
                                    });
  addon_data(env).program_constructor = Napi::Persistent(ctor);
  exports.Set("NativeProgram", ctor);
}

ProgramWrap::ProgramWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ProgramWrap>(info) {
  Napi::Env env = info.Env();
  guard(env, [&]() -> Napi::Value {
    Result<std::shared_ptr<const Program>> loaded =
        make_error(ErrorCode::kInvalidProgram, "NativeProgram expects a file path or a Uint8Array");
    if (info.Length() >= 1 && info[0].IsString()) {
      loaded = Program::load_file(info[0].As<Napi::String>().Utf8Value());
    } else if (info.Length() >= 1 && info[0].IsTypedArray()) {
      Napi::TypedArray bytes = info[0].As<Napi::TypedArray>();
      loaded = Program::load_bytes(typed_array_bytes(bytes), bytes.ByteLength());
    }
    if (!loaded) throw make_js_error(env, loaded.error());
    program_ = std::move(*loaded);
    return env.Undefined();
  });
}

ProgramWrap* ProgramWrap::unwrap(const Napi::Value& value) {
  if (!value.IsObject()) return nullptr;
  Napi::Object object = value.As<Napi::Object>();
  if (!object.InstanceOf(addon_data(value.Env()).program_constructor.Value())) return nullptr;
  return Napi::ObjectWrap<ProgramWrap>::Unwrap(object);
}

Napi::Value ProgramWrap::describe(const Napi::CallbackInfo& info) {
  return guard(info.Env(), [&]() -> Napi::Value { return to_js(info.Env(), describe_program(*program_)); });
}

Napi::Value ProgramWrap::file_size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(program_->file_size()));
}

}  // namespace etna::addon
