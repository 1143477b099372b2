#include "module_wrap.h"

#include <chrono>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "addon_data.h"
#include "convert.h"
#include "program_wrap.h"

namespace etna::addon {
namespace {

// One call, begun on the JS thread (inputs taken, call lease held); the
// worker thread touches only this.
struct CallBaton {
  std::shared_ptr<Module> module;  // declared first: outlives `call`
  std::unique_ptr<Module::Call> call;
  size_t method = 0;                              // its place in methodNames
  std::vector<Napi::ObjectReference> keep_alive;  // output buffers the worker writes
  bool profile = false;                           // time the call and return its events
  std::vector<ProfileEvent> events;               // filled by a profiled call

  Result<std::vector<OutputValue>> run() { return call->run(profile ? &events : nullptr); }
  Napi::Value results_to_js(Napi::Env env, const std::vector<OutputValue>& outputs) const {
    if (profile) return profiled_outputs_to_js(env, outputs, events);
    return outputs_to_js(env, outputs);
  }
};

// execute(methodIndex, inputs, outputBuffers, profile?): converts the
// arguments and begins the call, so the caller's input arrays are read before
// this returns. The method is named by its place in methodNames.
Status begin_call(const Napi::CallbackInfo& info, CallBaton& baton) {
  if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsArray() || !info[2].IsArray()) {
    return make_error(ErrorCode::kInvalidInput, "execute expects (method index, inputs array, output buffers array)");
  }
  const auto method = whole_number_below(info[0], 4294967296.0);
  if (!method) return make_error(ErrorCode::kInvalidInput, "execute: the method index must be a non-negative integer");
  baton.profile = info.Length() >= 4 && info[3].IsBoolean() && info[3].As<Napi::Boolean>().Value();
  Napi::Array js_inputs = info[1].As<Napi::Array>();
  std::vector<InputValue> inputs(js_inputs.Length());
  for (uint32_t i = 0; i < js_inputs.Length(); ++i) ETNA_TRY(input_from_js(js_inputs.Get(i), i, inputs[i]));
  Napi::Array js_outputs = info[2].As<Napi::Array>();
  std::vector<OutputBuffer> outputs(js_outputs.Length());
  for (uint32_t i = 0; i < js_outputs.Length(); ++i) {
    ETNA_TRY(output_buffer_from_js(js_outputs.Get(i), i, outputs[i], baton.keep_alive));
  }
  baton.method = static_cast<size_t>(*method);
  auto call = baton.module->begin_call(baton.method, inputs, std::move(outputs));
  if (!call) return call.error();
  baton.call = std::move(*call);
  return Status::ok();
}

// begin_call on `module` for execute and executeSync, which throw its failure.
CallBaton begin_call_or_throw(const Napi::CallbackInfo& info, std::shared_ptr<Module> module) {
  CallBaton baton;
  baton.module = std::move(module);
  Status begun = begin_call(info, baton);
  if (!begun) throw make_js_error(info.Env(), begun.error());
  return baton;
}

// Runs `run()` on the libuv pool and settles a promise on the JS thread:
// rejected with an EtnaError-shaped error, or resolved with `resolve(value)`.
template <typename T>
class PromiseWorker : public Napi::AsyncWorker {
 public:
  PromiseWorker(Napi::Env env, const char* name)
      : Napi::AsyncWorker(env, name),
        deferred_(Napi::Promise::Deferred::New(env)),
        result_(make_error(ErrorCode::kInternal, std::string(name) + " did not run")) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  virtual Result<T> run() = 0;
  virtual Napi::Value resolve(Napi::Env env, T& value) = 0;

 private:
  void Execute() override {
    try {
      result_ = run();
    } catch (const std::exception& e) {
      result_ = make_error(ErrorCode::kInternal, std::string("internal error: ") + e.what());
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (!result_) {
      deferred_.Reject(make_js_error(env, result_.error()).Value());
    } else {
      deferred_.Resolve(resolve(env, *result_));
    }
  }

  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

  Napi::Promise::Deferred deferred_;
  Result<T> result_;
};

// A file for the load worker to read, or bytes already copied off the JS heap
// (JS may change or detach its buffer once the call returns).
struct LoadSource {
  std::string path;
  std::unique_ptr<ByteSource> bytes;
};

// Copies `value` now when it is bytes; keeps it as a path when it is a string.
std::optional<LoadSource> load_source(const Napi::Value& value) {
  if (value.IsString()) return LoadSource{value.As<Napi::String>().Utf8Value(), nullptr};
  auto view = view_bytes(value);
  if (!view) return std::nullopt;
  auto copy = copy_bytes(view->data, view->size);
  if (!copy) throw make_js_error(value.Env(), copy.error());
  return LoadSource{std::string(), std::move(*copy)};
}

struct LoadedModule {
  std::shared_ptr<const Program> program;  // set when the worker loaded it
  std::unique_ptr<Module> module;
};

// Reads and verifies the program and its external data (when given as a path
// or bytes) and then loads the module, all on the pool.
class LoadWorker : public PromiseWorker<LoadedModule> {
 public:
  LoadWorker(Napi::Env env, std::shared_ptr<const Program> program, std::optional<LoadSource> program_source,
             std::optional<LoadSource> external_data, FileAccess access, ModuleOptions options)
      : PromiseWorker(env, "etna:load"),
        program_(std::move(program)),
        program_source_(std::move(program_source)),
        external_data_(std::move(external_data)),
        access_(access),
        options_(std::move(options)) {}

 protected:
  Result<LoadedModule> run() override {
    LoadedModule loaded;
    if (program_source_) {
      auto program = program_source_->bytes ? Program::load(std::move(program_source_->bytes))
                                            : Program::load_file(program_source_->path, access_);
      if (!program) return program.error();
      loaded.program = std::move(*program);
    }
    if (external_data_) {
      auto map = external_data_->bytes ? DataMap::load(std::move(external_data_->bytes))
                                       : DataMap::load_file(external_data_->path, access_);
      if (!map) return map.error();
      options_.external_data = std::move(*map);
    }
    auto module = Module::load(loaded.program ? loaded.program : program_, options_);
    if (!module) return module.error();
    loaded.module = std::move(*module);
    return Result<LoadedModule>(std::move(loaded));
  }

  // { module: NativeModule, program?: NativeProgram (when loaded here) }
  Napi::Value resolve(Napi::Env env, LoadedModule& loaded) override {
    auto* holder = new std::shared_ptr<Module>(std::move(loaded.module));
    Napi::External<std::shared_ptr<Module>> external = Napi::External<std::shared_ptr<Module>>::New(
        env, holder, [](Napi::Env, std::shared_ptr<Module>* data) { delete data; });
    Napi::Object result = Napi::Object::New(env);
    result.Set("module", addon_data(env).module_constructor.New({external}));
    if (loaded.program) result.Set("program", ProgramWrap::wrap(env, std::move(loaded.program)));
    return result;
  }

 private:
  std::shared_ptr<const Program> program_;
  std::optional<LoadSource> program_source_;
  std::optional<LoadSource> external_data_;
  FileAccess access_;
  ModuleOptions options_;
};

// One execute() on a call thread of the environment's CallRunner.
class ExecuteJob : public CallRunner::Job {
 public:
  ExecuteJob(CallBaton baton, std::shared_ptr<ModuleWrap::RunTimes> run_times,
             std::shared_ptr<ModuleWrap::Accounting> accounting)
      : baton_(std::move(baton)), run_times_(std::move(run_times)), accounting_(std::move(accounting)) {}

  void run() override {
    const auto start = std::chrono::steady_clock::now();
    try {
      result_ = baton_.run();
    } catch (const std::exception& e) {
      result_ = make_error(ErrorCode::kInternal, std::string("internal error: ") + e.what());
    }
    baton_.call.reset();  // the lease goes back before the promise settles
    run_time_ = std::chrono::steady_clock::now() - start;
  }

  void settle(Napi::Env env, Napi::Promise::Deferred& deferred) override {
    (*run_times_)[baton_.method] = run_time_;
    accounting_->after_call(env, *baton_.module, baton_.method);
    if (!result_) {
      deferred.Reject(make_js_error(env, result_.error()).Value());
    } else {
      deferred.Resolve(baton_.results_to_js(env, *result_));
    }
  }

 private:
  CallBaton baton_;
  std::shared_ptr<ModuleWrap::RunTimes> run_times_;
  std::shared_ptr<ModuleWrap::Accounting> accounting_;
  std::chrono::steady_clock::duration run_time_{};
  Result<std::vector<OutputValue>> result_ = make_error(ErrorCode::kInternal, "etna:execute did not run");
};

// The snapshot's layout: the module's whole state, or, when `value` is an
// array [offset, size, offset, size, ...], just those byte ranges of it.
StateLayout snapshot_layout(Napi::Env env, Module& module, const Napi::Value& value) {
  if (value.IsUndefined()) {
    auto layout = module.state_layout();
    if (!layout) throw make_js_error(env, layout.error());
    return **layout;
  }
  const Error malformed =
      make_error(ErrorCode::kInvalidInput, "state ranges must be an array of [offset, size] pairs of whole numbers");
  if (!value.IsArray() || value.As<Napi::Array>().Length() % 2 != 0) throw make_js_error(env, malformed);
  Napi::Array flat = value.As<Napi::Array>();
  std::vector<ByteRange> ranges;
  for (uint32_t i = 0; i < flat.Length(); i += 2) {
    constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
    auto offset = whole_number_below(flat.Get(i), kExactIntegers);
    auto size = whole_number_below(flat.Get(i + 1), kExactIntegers);
    if (!offset || !size) throw make_js_error(env, malformed);
    ranges.push_back(ByteRange{*offset, *size});
  }
  auto layout = module.state_layout(ranges);
  if (!layout) throw make_js_error(env, layout.error());
  return std::move(*layout);
}

// A state operation (saveState, restoreState, copyStateTo), with any
// exception it throws as kInternal: none may leave the addon.
using StateOperation = std::function<Status()>;

Status run_guarded(const StateOperation& operation) {
  try {
    return operation();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::kInternal, std::string("internal error: ") + e.what());
  }
}

// A state operation on a call thread. What it reads or writes is held alive
// by the operation's captures and by `keep_alive` (a snapshot's JS array,
// which only the caller's module uses until the promise settles).
class StateJob : public CallRunner::Job {
 public:
  StateJob(StateOperation operation, Napi::ObjectReference keep_alive)
      : operation_(std::move(operation)), keep_alive_(std::move(keep_alive)) {}

  void run() override { status_ = run_guarded(operation_); }

  void settle(Napi::Env env, Napi::Promise::Deferred& deferred) override {
    if (!status_) {
      deferred.Reject(make_js_error(env, status_.error()).Value());
    } else {
      deferred.Resolve(env.Undefined());
    }
  }

 private:
  StateOperation operation_;
  Napi::ObjectReference keep_alive_;
  Status status_ = make_error(ErrorCode::kInternal, "etna:state did not run");
};

// Runs `operation` now (`sync`: undefined, or a thrown error) or on a call
// thread (a promise).
Napi::Value start_state_operation(Napi::Env env, bool sync, StateOperation operation,
                                  Napi::ObjectReference keep_alive) {
  if (sync) {
    Status status = run_guarded(operation);
    if (!status) throw make_js_error(env, status.error());
    return env.Undefined();
  }
  auto job = std::make_unique<StateJob>(std::move(operation), std::move(keep_alive));
  return addon_data(env).call_runner->submit(env, std::move(job), false);
}

}  // namespace

void ModuleWrap::init(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = DefineClass(env, "NativeModule",
                                    {
                                        InstanceAccessor<&ModuleWrap::method_names>("methodNames"),
                                        InstanceMethod<&ModuleWrap::memory_report>("memoryReport"),
                                        InstanceMethod<&ModuleWrap::execute>("execute"),
                                        InstanceMethod<&ModuleWrap::execute_sync>("executeSync"),
                                        InstanceMethod<&ModuleWrap::state_snapshot_bytes>("stateSnapshotBytes"),
                                        InstanceMethod<&ModuleWrap::save_state>("saveState"),
                                        InstanceMethod<&ModuleWrap::restore_state>("restoreState"),
                                        InstanceMethod<&ModuleWrap::copy_state_to>("copyStateTo"),
                                        InstanceMethod<&ModuleWrap::populate_state>("populateState"),
                                        InstanceMethod<&ModuleWrap::dispose>("dispose"),
                                    });
  addon_data(env).module_constructor = Napi::Persistent(ctor);
  exports.Set("loadModule", Napi::Function::New(env, &ModuleWrap::load_module, "loadModule"));
  exports.Set("profileClock",
              Napi::Function::New(
                  env, [](const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), profile_clock_us()); },
                  "profileClock"));
}

ModuleWrap::ModuleWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ModuleWrap>(info) {
  if (info.Length() != 1 || !info[0].IsExternal()) {
    throw make_js_error(info.Env(), Error{ErrorCode::kInternal, "NativeModule is created by loadModule()"});
  }
  // Taken, not copied: the external lives until a garbage collection, and a
  // copy there would keep the module alive after dispose().
  module_ = std::move(*info[0].As<Napi::External<std::shared_ptr<Module>>>().Data());
  run_times_ = std::make_shared<RunTimes>(module_->method_names().size(), std::chrono::steady_clock::duration::max());
  accounting_ = std::make_shared<Accounting>(info.Env(), *module_);
}

ModuleWrap::~ModuleWrap() {
  if (accounting_) accounting_->release(Env());
}

// What a module costs now: its own bytes but the pages of its arenas that no
// call has touched. A session's KV cache is reserved whole at load and filled
// as it runs; telling V8 the whole reservation at every load made it collect
// garbage at almost every session or fork of a large model.
static uint64_t resident_owned_bytes(const Module& module) {
  const MemoryReport report = module.memory_report();
  return report.owned_bytes - report.untouched_bytes;
}

ModuleWrap::Accounting::Accounting(Napi::Env env, const Module& module) : called_(module.method_names().size(), false) {
  external_.report(env, resident_owned_bytes(module));
}

void ModuleWrap::Accounting::after_call(Napi::Env env, const Module& module, size_t method) {
  if (called_[method] || external_.released()) return;
  called_[method] = true;
  external_.report(env, resident_owned_bytes(module));
}

Napi::Value ModuleWrap::load_module(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    if (info.Length() < 1) throw make_js_error(env, Error{ErrorCode::kInvalidInput, "loadModule expects a program"});
    ProgramWrap* program = ProgramWrap::unwrap(info[0]);
    std::optional<LoadSource> program_source;
    if (program == nullptr) {
      program_source = load_source(info[0]);
      if (!program_source) {
        throw make_js_error(env,
                            Error{ErrorCode::kInvalidInput,
                                  "loadModule expects a NativeProgram, a file path, an ArrayBuffer or a view of one"});
      }
    }
    ModuleOptions options;
    FileAccess access = FileAccess::kCopy;
    std::optional<LoadSource> external_data;
    if (info.Length() >= 2 && info[1].IsObject()) {
      Napi::Object object = info[1].As<Napi::Object>();
      Napi::Value share = object.Get("share");
      if (share.IsString()) {
        bool ok = false;
        options.sharing = parse_sharing(share.As<Napi::String>().Utf8Value(), &ok);
        if (!ok) throw make_js_error(env, Error{ErrorCode::kInvalidInput, "unknown sharing mode"});
      }
      Napi::Value threads = object.Get("numThreads");
      if (threads.IsNumber()) options.num_threads = threads.As<Napi::Number>().Int32Value();
      Napi::Value pool = object.Get("threadPool");
      if (pool.IsString()) {
        const std::string kind = pool.As<Napi::String>().Utf8Value();
        if (kind != "shared" && kind != "own") {
          throw make_js_error(env, Error{ErrorCode::kInvalidInput, "threadPool must be 'shared' or 'own'"});
        }
        options.thread_pool = kind == "own" ? ThreadPoolKind::kOwn : ThreadPoolKind::kShared;
      }
      Napi::Value mmap = object.Get("mmap");
      if (mmap.IsBoolean() && mmap.As<Napi::Boolean>().Value()) access = FileAccess::kMap;
      external_data = load_source(object.Get("externalData"));
    }
    auto* worker = new LoadWorker(env, program != nullptr ? program->live_program(env) : nullptr,
                                  std::move(program_source), std::move(external_data), access, std::move(options));
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
  });
}

std::shared_ptr<Module> ModuleWrap::live_module(Napi::Env env) const {
  if (!module_) throw make_js_error(env, Error{ErrorCode::kDisposed, "module has been disposed"});
  return module_;
}

Napi::Value ModuleWrap::method_names(const Napi::CallbackInfo& info) {
  return guard(info.Env(), [&]() -> Napi::Value {
    const auto& names = live_module(info.Env())->method_names();
    Napi::Array array = Napi::Array::New(info.Env(), names.size());
    for (uint32_t i = 0; i < names.size(); ++i) array.Set(i, names[i]);
    return array;
  });
}

Napi::Value ModuleWrap::memory_report(const Napi::CallbackInfo& info) {
  return guard(info.Env(),
               [&]() -> Napi::Value { return to_js(info.Env(), live_module(info.Env())->memory_report()); });
}

Napi::Value ModuleWrap::execute(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    CallBaton baton = begin_call_or_throw(info, live_module(env));
    const bool expect_short = (*run_times_)[baton.method] < CallRunner::kShortCall;
    return addon_data(env).call_runner->submit(
        env, std::make_unique<ExecuteJob>(std::move(baton), run_times_, accounting_), expect_short);
  });
}

Napi::Value ModuleWrap::execute_sync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    CallBaton baton = begin_call_or_throw(info, live_module(env));
    auto result = baton.run();
    baton.call.reset();
    accounting_->after_call(env, *baton.module, baton.method);
    if (!result) throw make_js_error(env, result.error());
    return baton.results_to_js(env, *result);
  });
}

Napi::Value ModuleWrap::state_snapshot_bytes(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    const StateLayout layout = snapshot_layout(env, *live_module(env), info[0]);
    return Napi::Number::New(env, static_cast<double>(layout.snapshot_bytes()));
  });
}

Napi::Value ModuleWrap::save_state(const Napi::CallbackInfo& info) { return state_operation(info, true); }

Napi::Value ModuleWrap::restore_state(const Napi::CallbackInfo& info) { return state_operation(info, false); }

Napi::Value ModuleWrap::state_operation(const Napi::CallbackInfo& info, bool save) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    std::shared_ptr<Module> module = live_module(env);
    // An ArrayBuffer or a view: an object, which an asynchronous job keeps alive.
    const ByteSpan view = bytes_argument(info, save ? "saveState" : "restoreState");
    // Shared by the operation, which a call thread may run later.
    std::shared_ptr<const StateLayout> save_layout;
    if (save) save_layout = std::make_shared<const StateLayout>(snapshot_layout(env, *module, info[2]));
    // The JS array is writable memory of the caller's; view_bytes only reads.
    auto* bytes = const_cast<uint8_t*>(view.data);
    const bool sync = info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
    auto operation = [module = std::move(module), save_layout = std::move(save_layout), bytes, size = view.size] {
      return save_layout ? module->save_state(*save_layout, bytes, size) : module->restore_state(bytes, size);
    };
    return start_state_operation(env, sync, std::move(operation), Napi::Persistent(info[0].As<Napi::Object>()));
  });
}

Napi::Value ModuleWrap::copy_state_to(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    std::shared_ptr<Module> source = live_module(env);
    const bool is_module =
        info[0].IsObject() && info[0].As<Napi::Object>().InstanceOf(addon_data(env).module_constructor.Value());
    if (!is_module) throw make_js_error(env, Error{ErrorCode::kInvalidInput, "copyStateTo expects a NativeModule"});
    std::shared_ptr<Module> target = Napi::ObjectWrap<ModuleWrap>::Unwrap(info[0].As<Napi::Object>())->live_module(env);
    std::vector<ByteRange> ranges = snapshot_layout(env, *source, info[2]).ranges;
    const bool sync = info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
    auto operation = [source = std::move(source), target = std::move(target), ranges = std::move(ranges)] {
      return source->copy_state_to(*target, ranges);
    };
    // Both modules are held by the operation; there is no JS array to keep.
    return start_state_operation(env, sync, std::move(operation), Napi::ObjectReference());
  });
}

Napi::Value ModuleWrap::populate_state(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    std::shared_ptr<Module> module = live_module(env);
    std::vector<ByteRange> ranges = snapshot_layout(env, *module, info[1]).ranges;
    const bool sync = info[0].IsBoolean() && info[0].As<Napi::Boolean>().Value();
    auto operation = [module = std::move(module), ranges = std::move(ranges)] {
      return module->populate_state(ranges);
    };
    return start_state_operation(env, sync, std::move(operation), Napi::ObjectReference());
  });
}

Napi::Value ModuleWrap::dispose(const Napi::CallbackInfo& info) {
  // A call in flight keeps its own reference; memory goes when it finishes.
  module_.reset();
  accounting_->release(info.Env());
  return info.Env().Undefined();
}

}  // namespace etna::addon
