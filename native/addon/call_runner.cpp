#include "call_runner.h"

#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "convert.h"

namespace etna::addon {
namespace {

// How long a call thread watches for the next call before it sleeps: about
// what one wake-up of a sleeping thread costs on the machines measured, so
// a thread that waited in vain has spent what a wake-up would have.
constexpr std::chrono::microseconds kWatchBeforeSleep{25};

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

CallRunner::CallRunner(napi_env env, size_t max_threads) : env_(env), max_threads_(max_threads) {}

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
  Entry entry{std::move(job), Napi::Promise::Deferred::New(env)};
  Napi::Promise promise = entry.deferred.Promise();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Set before the call can finish, so that its thread leaves the result to the watch.
    if (expect_short && watch_ != nullptr) {
      watch_deadline_ns_ = uv_hrtime() + kResultWatchNs;
      if (!watching_) {
        watching_ = true;
        watch_->start();
      }
    }
    queued_.push_back(std::move(entry));
    queued_count_.store(queued_.size(), std::memory_order_release);
    // A thread more only when the idle ones are all spoken for.
    if (queued_.size() > idle_threads_ && threads_.size() < max_threads_) {
      try {
        threads_.emplace_back(&CallRunner::thread_main, this);
      } catch (const std::system_error&) {
        if (threads_.empty()) {
          Entry refused = std::move(queued_.back());
          queued_.pop_back();
          queued_count_.store(queued_.size(), std::memory_order_release);
          refused.deferred.Reject(
              make_js_error(env, Error{ErrorCode::kInternal, "could not start a thread to run the call"}).Value());
          return promise;
        }
        // Otherwise the running threads take it in turn.
      }
    }
  }
  work_ready_.notify_one();
  if (unsettled_++ == 0) finished_signal_.Ref(env);
  return promise;
}

void CallRunner::thread_main() {
#ifdef __linux__
  // Named, so that profilers, top and tests can tell etna's call threads from Node's own.
  pthread_setname_np(pthread_self(), "etna-call");
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  ++idle_threads_;
  for (;;) {
    lock.unlock();
    const auto watch_until = std::chrono::steady_clock::now() + kWatchBeforeSleep;
    while (queued_count_.load(std::memory_order_acquire) == 0 && !stopping_.load(std::memory_order_relaxed) &&
           std::chrono::steady_clock::now() < watch_until) {
      // Gives way rather than only pause: the JS thread may be waiting for
      // this very core (the scheduler tends to wake a thread on its waker's
      // core), and it is the one that brings the next call.
      std::this_thread::yield();
    }
    lock.lock();
    work_ready_.wait(lock, [this] { return stopping_.load() || !queued_.empty(); });
    if (stopping_.load()) return;
    --idle_threads_;
    Entry entry = std::move(queued_.front());
    queued_.pop_front();
    queued_count_.store(queued_.size(), std::memory_order_release);
    lock.unlock();
    entry.job->run();
    lock.lock();
    finished_.push_back(std::move(entry));
    finished_count_.store(finished_.size(), std::memory_order_release);
    // Idle again before anyone learns of the result: a caller that calls
    // again as soon as it hears must find this thread, not start another.
    ++idle_threads_;
    // The wake-up on its way, or the JS thread watching, settles this one too.
    if (signal_pending_ || watching_) continue;
    signal_pending_ = true;
    lock.unlock();
    signal_finished();
    lock.lock();
  }
}

void CallRunner::settle_finished(Napi::Env env) {
  std::vector<Entry> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(finished_);
    finished_count_.store(0, std::memory_order_relaxed);
    signal_pending_ = false;
  }
  for (Entry& entry : batch) {
    Napi::HandleScope scope(env);
    try {
      entry.job->settle(env, entry.deferred);
    } catch (const Napi::Error& error) {
      entry.deferred.Reject(error.Value());
    } catch (const std::exception& error) {
      entry.deferred.Reject(
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
  const bool settled = finished_count_.load(std::memory_order_acquire) == 0 || settle_from_loop();
  if (settled && unsettled_ != 0 && uv_hrtime() < watch_deadline_ns_) {
    // Should the call's thread be waiting for this core, it runs now.
    std::this_thread::yield();
    return;
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watching_ = false;
    // Finished since the look above, so no wake-up was sent for it.
    if (!finished_.empty() && !signal_pending_) wake = signal_pending_ = true;
  }
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  work_ready_.notify_all();
  // threads_ changes only on this (the JS) thread.
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace etna::addon
