// JS handle for a Module. Loading runs on the libuv pool, execution on the
// addon's call threads (call_runner.h); the JS thread only converts arguments
// and results and begins each call (which copies its inputs into the module;
// no runtime logic here).
#pragma once

#include <napi.h>

#include <chrono>
#include <memory>
#include <vector>

#include "core/module.h"
#include "external_memory.h"

namespace etna::addon {

class ModuleWrap : public Napi::ObjectWrap<ModuleWrap> {
 public:
  // How long each method's last execute() ran (unknown: the longest time),
  // so that a short method's result is watched for. JS thread only.
  using RunTimes = std::vector<std::chrono::steady_clock::duration>;

  // What the handle tells V8 of the module's own memory
  // (MemoryReport::owned_bytes): reported at load and again after each
  // method's first call, which loads the method when the module did not.
  // JS thread only.
  class Accounting {
   public:
    Accounting(Napi::Env env, const Module& module);
    void after_call(Napi::Env env, const Module& module, size_t method);
    void release(Napi::Env env) { external_.release(env); }

   private:
    ExternalMemory external_;
    std::vector<bool> called_;  // per method: its first call has been accounted for
  };

  static void init(Napi::Env env, Napi::Object exports);
  // Constructed only by loadModule, with the native Module as an External.
  explicit ModuleWrap(const Napi::CallbackInfo& info);
  // Collected without dispose(): the module goes once no call holds it.
  ~ModuleWrap() override;

 private:
  // loadModule(program | path | bytes, { share, numThreads, threadPool, mmap, externalData })
  //   -> Promise<{ module, program? }>: files are read on the pool
  static Napi::Value load_module(const Napi::CallbackInfo& info);
  Napi::Value method_names(const Napi::CallbackInfo& info);
  Napi::Value memory_report(const Napi::CallbackInfo& info);
  // execute(name, inputs, outputBuffers, profile?) -> Promise<outputs>, or
  // Promise<{ outputs, profile }> when profiled; the caller (lib/module.ts)
  // calls it only when the module is idle.
  Napi::Value execute(const Napi::CallbackInfo& info);
  Napi::Value execute_sync(const Napi::CallbackInfo& info);
  // stateSnapshotBytes(ranges?) -> number; saveState(target, sync, ranges?)
  // and restoreState(snapshot, sync) -> Promise<void>, or undefined when
  // sync. `ranges`: [offset, size, ...] of a partial snapshot. Like execute,
  // the caller calls them only when the module is idle.
  Napi::Value state_snapshot_bytes(const Napi::CallbackInfo& info);
  Napi::Value save_state(const Napi::CallbackInfo& info);
  Napi::Value restore_state(const Napi::CallbackInfo& info);
  Napi::Value state_operation(const Napi::CallbackInfo& info, bool save);
  // copyStateTo(targetModule, sync, ranges?) -> Promise<void>, or undefined
  // when sync: the state's bytes (all, or those ranges) into the target's.
  // The caller calls it only when both modules are idle.
  Napi::Value copy_state_to(const Napi::CallbackInfo& info);
  Napi::Value populate_state(const Napi::CallbackInfo& info);
  Napi::Value dispose(const Napi::CallbackInfo& info);

  std::shared_ptr<Module> live_module(Napi::Env env) const;

  std::shared_ptr<Module> module_;
  std::shared_ptr<RunTimes> run_times_;     // shared with calls in flight
  std::shared_ptr<Accounting> accounting_;  // shared with calls in flight
};

}  // namespace etna::addon
