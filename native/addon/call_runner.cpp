#include "call_runner.h"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "convert.h"

namespace etna::addon {
namespace {

// How long the JS thread looks for a short call's result before it sleeps.
constexpr uint64_t kResultWatchNs = std::chrono::nanoseconds(CallRunner::kResultWatch).count();

}  // namespace

size_t CallRunner::max_threads_from_environment() {
  constexpr size_t kLibuvDefault = 4, kLibuvMaximum = 1024;
  const char* value = std::getenv("UV_THREADPOOL_SIZE");
  if (value == nullptr || *value == '\0') return kLibuvDefault;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 1) return kLibuvDefault;
  return static_cast<size_t>(parsed) > kLibuvMaximum ? kLibuvMaximum : static_cast<size_t>(parsed);
}

struct CallRunner::LoopWatch {
  uv_check_t check;              // after each poll of the loop: looks for results
  uv_idle_t idle;                // while started, the loop's poll does not block
  CallRunner* runner = nullptr;  // null once the runner has stopped
  napi_async_cleanup_hook_handle teardown = nullptr;
  int open_handles = 2;

  void start() {
    uv_check_start(&check, [](uv_check_t* handle) {
      auto* watch = static_cast<LoopWatch*>(handle->data);
      if (watch->runner != nullptr) watch->runner->look_for_results();
    });
    uv_idle_start(&idle, [](uv_idle_t*) {});
  }
  void stop() {
    uv_check_stop(&check);
    uv_idle_stop(&idle);
  }
  // At environment teardown: closes both handles, then frees itself.
  static void close(napi_async_cleanup_hook_handle, void* arg) {
    auto* watch = static_cast<LoopWatch*>(arg);
    if (watch->runner != nullptr) watch->runner->watch_ = nullptr;
    watch->runner = nullptr;
    const auto closed = [](uv_handle_t* handle) {
      auto* closing = static_cast<LoopWatch*>(handle->data);
      if (--closing->open_handles != 0) return;
      if (closing->teardown != nullptr) napi_remove_async_cleanup_hook(closing->teardown);
      delete closing;
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&watch->check), closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&watch->idle), closed);
  }
};

CallRunner::CallRunner(napi_env env, size_t max_threads)
    : env_(env), calls_(max_threads, [this] { signal_finished(); }) {}

CallRunner* CallRunner::create(Napi::Env env) {
  auto* runner = new CallRunner(env, max_threads_from_environment());
  // Never released: its finalizer runs at environment teardown. Unreferenced
  // while no call is unsettled, so an idle runner keeps no process alive.
  runner->finished_signal_ =
      Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "etna:execute", 0,
                                    1, runner, [](Napi::Env, CallRunner* finished) {
                                      finished->stop();
                                      delete finished;
                                    });
  runner->finished_signal_.Unref(env);
  runner->settle_context_.emplace(env, "etna:execute");
  // Without its own handles the runner still works: every result wakes the JS thread.
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) == napi_ok && loop != nullptr) {
    auto* watch = new LoopWatch();
    uv_check_init(loop, &watch->check);
    uv_idle_init(loop, &watch->idle);
    watch->check.data = watch->idle.data = watch;
    // Neither keeps the process alive: the finished signal does, while a call is unsettled.
    uv_unref(reinterpret_cast<uv_handle_t*>(&watch->check));
    uv_unref(reinterpret_cast<uv_handle_t*>(&watch->idle));
    if (napi_add_async_cleanup_hook(env, &LoopWatch::close, watch, &watch->teardown) == napi_ok) {
      watch->runner = runner;
      runner->watch_ = watch;
    } else {
      LoopWatch::close(nullptr, watch);
    }
  }
  return runner;
}

Napi::Promise CallRunner::submit(Napi::Env env, std::unique_ptr<Job> job, bool expect_short) {
  auto call = std::make_unique<Call>(std::move(job), Napi::Promise::Deferred::New(env));
  Napi::Promise promise = call->deferred.Promise();
  // Watching before the call is queued, so that its thread leaves the result to the watch.
  if (expect_short && watch_ != nullptr) {
    watch_deadline_ns_ = uv_hrtime() + kResultWatchNs;
    if (calls_.start_watching()) watch_->start();
  }
  std::unique_ptr<CallQueue::Task> refused = calls_.submit(std::move(call));
  if (refused != nullptr) {
    static_cast<Call&>(*refused).deferred.Reject(
        make_js_error(env, Error{ErrorCode::kInternal, "could not start a thread to run the call"}).Value());
    return promise;
  }
  if (unsettled_++ == 0) finished_signal_.Ref(env);
  return promise;
}

void CallRunner::settle_finished(Napi::Env env) {
  // Only Calls are queued.
  std::vector<std::unique_ptr<CallQueue::Task>> batch = calls_.take_finished();
  for (auto& task : batch) {
    Call& call = static_cast<Call&>(*task);
    Napi::HandleScope scope(env);
    try {
      call.job->settle(env, call.deferred);
    } catch (const Napi::Error& error) {
      call.deferred.Reject(error.Value());
    } catch (const std::exception& error) {
      call.deferred.Reject(
          make_js_error(env, Error{ErrorCode::kInternal, std::string("internal error: ") + error.what()}).Value());
    }
  }
  unsettled_ -= batch.size();
  if (unsettled_ == 0 && !batch.empty()) finished_signal_.Unref(env);
}

void CallRunner::signal_finished() {
  // Fails only once teardown has begun, when stop() takes over.
  finished_signal_.NonBlockingCall([this](Napi::Env env, Napi::Function) { settle_finished(env); });
}

void CallRunner::look_for_results() {
  const bool settled = calls_.finished_count() == 0 || settle_from_loop();
  if (settled && unsettled_ != 0 && uv_hrtime() < watch_deadline_ns_) {
    // Should the call's thread be waiting for this core, it runs now.
    std::this_thread::yield();
    return;
  }
  // Finished since the look above, so no wake-up was sent for it.
  const bool wake = calls_.stop_watching();
  if (watch_ != nullptr) watch_->stop();
  if (wake) signal_finished();
}

bool CallRunner::settle_from_loop() {
  // Raw calls, each checked: nothing may throw out of a libuv callback, and
  // in an environment being torn down (a worker terminated) they fail.
  napi_handle_scope handles = nullptr;
  if (napi_open_handle_scope(env_, &handles) != napi_ok) return false;
  napi_value resource = nullptr;
  napi_callback_scope callbacks = nullptr;
  const bool opened = napi_create_object(env_, &resource) == napi_ok &&
                      napi_open_callback_scope(env_, resource, *settle_context_, &callbacks) == napi_ok;
  if (opened) {
    try {
      settle_finished(Napi::Env(env_));
    } catch (const std::exception&) {
      // Only when the environment is going away; its calls are dropped with it.
    }
    // Promise reactions (the callers' awaits) run as this scope closes; a
    // caller that calls again from there extends the watch.
    napi_close_callback_scope(env_, callbacks);
  }
  napi_close_handle_scope(env_, handles);
  return opened;
}

void CallRunner::stop() {
  if (watch_ != nullptr) {
    watch_->stop();
    watch_->runner = nullptr;
    watch_ = nullptr;
  }
  settle_context_.reset();
  calls_.stop();
}

}  // namespace etna::addon
