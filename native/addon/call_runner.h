// Runs promise-returning calls (execute) off the JS thread on threads of its
// own, and settles their promises on the JS thread.
//
// Why not Napi::AsyncWorker on libuv's pool: waking a sleeping thread costs
// more than a small model's whole call (a round trip on et_add took 35 µs,
// the call itself 4). A call thread that has just finished a call watches
// the queue for a short while before it sleeps, so a caller that calls again
// at once (a stream of small steps) finds it awake; then the result is often
// back before the JS thread has gone to sleep. Finished calls are settled in
// one wake-up of the JS thread for all that finished in the meantime.
#pragma once

#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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

  // Queues `job` and returns its promise. JS thread only.
  Napi::Promise submit(Napi::Env env, std::unique_ptr<Job> job);

 private:
  struct Entry {
    std::unique_ptr<Job> job;
    Napi::Promise::Deferred deferred;
  };

  explicit CallRunner(size_t max_threads) : max_threads_(max_threads) {}
  ~CallRunner() = default;

  void thread_main();
  // On the JS thread: settles every finished call.
  void settle_finished(Napi::Env env);
  // At environment teardown, on the JS thread: stops and joins the threads.
  void stop();

  const size_t max_threads_;
  Napi::ThreadSafeFunction finished_signal_;
  size_t unsettled_ = 0;  // JS thread only: the signal keeps the loop alive while nonzero

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<Entry> queued_;
  std::vector<Entry> finished_;
  bool signal_pending_ = false;  // a wake-up of the JS thread is on its way
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> queued_count_{0};  // queued_.size(), read without the lock while watching
  size_t idle_threads_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace etna::addon
