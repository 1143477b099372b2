// JS handle for an immutable Program: load from a path or bytes, describe.
#pragma once

#include <napi.h>

#include <memory>
#include <optional>
#include <string>

#include "core/bytes.h"
#include "core/program.h"
#include "external_memory.h"

namespace etna::addon {

class ProgramWrap : public Napi::ObjectWrap<ProgramWrap> {
 public:
  static void init(Napi::Env env, Napi::Object exports);
  // new NativeProgram(path, mmap) or new NativeProgram(bytes): loads on the
  // calling thread. Also made by loadModule around a program loaded on the pool.
  explicit ProgramWrap(const Napi::CallbackInfo& info);
  // Collected without dispose(): the program goes with its last module.
  ~ProgramWrap() override;

  static Napi::Object wrap(Napi::Env env, std::shared_ptr<const Program> program);
  // The program; throws DISPOSED once dispose() has dropped it.
  const std::shared_ptr<const Program>& live_program(Napi::Env env) const;
  static ProgramWrap* unwrap(const Napi::Value& value);

 private:
  Napi::Value describe(const Napi::CallbackInfo& info);
  Napi::Value file_size(const Napi::CallbackInfo& info);
  // Drops this handle's reference: the program is freed with its last module.
  Napi::Value dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<const Program> program_;
  ExternalMemory external_memory_;  // the program's own bytes, while this handle holds it
};

// The bytes an ArrayBuffer or any view of one (typed array, Buffer, DataView)
// shows, offset included; nullopt for any other value. Valid only until JS
// runs again: copy before leaving the calling thread.
std::optional<ByteSpan> view_bytes(const Napi::Value& value);

// view_bytes of a call's first argument; throws INVALID_INPUT, "`function`
// expects an ArrayBuffer or a view of one", when it is none.
ByteSpan bytes_argument(const Napi::CallbackInfo& info, const std::string& function);

}  // namespace etna::addon
