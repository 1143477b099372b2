// JS handle for an immutable Program: load from a path or bytes, describe.
#pragma once

#include <napi.h>

#include <memory>

#include "core/program.h"

namespace etna::addon {

class ProgramWrap : public Napi::ObjectWrap<ProgramWrap> {
 public:
  static void init(Napi::Env env, Napi::Object exports);
  // new NativeProgram(pathOrBytes)
  explicit ProgramWrap(const Napi::CallbackInfo& info);

  const std::shared_ptr<const Program>& program() const { return program_; }
  static ProgramWrap* unwrap(const Napi::Value& value);

 private:
  Napi::Value describe(const Napi::CallbackInfo& info);
  Napi::Value file_size(const Napi::CallbackInfo& info);

  std::shared_ptr<const Program> program_;
};

}  // namespace etna::addon
