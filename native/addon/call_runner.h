// Runs promise-returning calls (execute, saveState, restoreState) off the JS
// thread and settles their promises on the JS thread. Which thread takes a
// call, and when the JS thread must be woken, is native/core/call_queue.h's
// policy; this is the N-API and libuv layer around it.
//
// Waking the JS thread costs about as much as a small model's call, so for a
// call expected to be short the JS thread does not sleep at all for a little
// while: its event loop keeps turning (every other event is served as usual)
// and looks for the result on each turn. Past that while it sleeps and is
// woken by the queue's wake-up. Finished calls are settled in one turn of the
// JS thread for all that finished in the meantime.
#pragma once

#include <napi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <uv.h>

#include "core/call_queue.h"

namespace etna::addon {

class CallRunner {
 public:
  // One call: run() on a call thread, then settle() on the JS thread, which
  // resolves or rejects the call's promise.
  class Job {
   public:
    virtual ~Job() = default;
    virtual void run() = 0;
    virtual void settle(Napi::Env env, Napi::Promise::Deferred& deferred) = 0;
  };

  // Made when the addon loads in an environment; lives until the
  // environment is torn down, when its threads finish their current call
  // and stop (calls still queued are dropped, their promises never settle).
  static CallRunner* create(Napi::Env env);

  // How many calls may run at once: UV_THREADPOOL_SIZE when set (1 to
  // 1024), as libuv reads it, otherwise libuv's default of 4.
  static size_t max_threads_from_environment();

  // A call that took less than this last time is expected to be short.
  static constexpr std::chrono::microseconds kShortCall{30};
  // How long the JS thread watches for a short call's result.
  static constexpr std::chrono::microseconds kResultWatch{60};

  // Queues `job` and returns its promise. JS thread only. `expect_short`:
  // the call will likely finish within the JS thread's watch (kResultWatch),
  // so the JS thread looks for its result rather than sleep.
  Napi::Promise submit(Napi::Env env, std::unique_ptr<Job> job, bool expect_short);

 private:
  // A job with its promise, as the queue holds it.
  struct Call : CallQueue::Task {
    Call(std::unique_ptr<Job> job, Napi::Promise::Deferred deferred)
        : job(std::move(job)), deferred(std::move(deferred)) {}
    void run() override { job->run(); }
    std::unique_ptr<Job> job;
    Napi::Promise::Deferred deferred;
  };

  // The event loop's handles that keep the JS thread watching; they outlive
  // the runner when the environment's teardown closes them after it.
  struct LoopWatch;

  CallRunner(napi_env env, size_t max_threads);
  ~CallRunner() = default;

  // On the JS thread: settles every finished call.
  void settle_finished(Napi::Env env);
  // From any thread: wakes the JS thread to settle what has finished.
  void signal_finished();
  // On the JS thread, each turn of the event loop while watching.
  void look_for_results();
  // settle_finished from a libuv callback; false when the environment can
  // no longer run JavaScript.
  bool settle_from_loop();
  // At environment teardown, on the JS thread: stops and joins the threads.
  void stop();

  const napi_env env_;
  Napi::ThreadSafeFunction finished_signal_;
  size_t unsettled_ = 0;                              // JS thread only: the signal keeps the loop alive while nonzero
  LoopWatch* watch_ = nullptr;                        // JS thread only; null once teardown has closed it
  uint64_t watch_deadline_ns_ = 0;                    // JS thread only (uv_hrtime)
  std::optional<Napi::AsyncContext> settle_context_;  // JS thread only
  CallQueue calls_;
};

}  // namespace etna::addon
