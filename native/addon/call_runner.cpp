#include "call_runner.h"

#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "convert.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace etna::addon {
namespace {

// How long a call thread watches for the next call before it sleeps: about
// what one wake-up of a sleeping thread costs on the machines measured, so
// a thread that waited in vain has spent what a wake-up would have.
constexpr std::chrono::microseconds kWatchBeforeSleep{25};

inline void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

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

CallRunner* CallRunner::create(Napi::Env env) {
  auto* runner = new CallRunner(max_threads_from_environment());
  // Never released: its finalizer runs at environment teardown. Unreferenced
  // while no call is unsettled, so an idle runner keeps no process alive.
  runner->finished_signal_ =
      Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), "etna:execute", 0,
                                    1, runner, [](Napi::Env, CallRunner* finished) {
                                      finished->stop();
                                      delete finished;
                                    });
  runner->finished_signal_.Unref(env);
  return runner;
}

Napi::Promise CallRunner::submit(Napi::Env env, std::unique_ptr<Job> job) {
  Entry entry{std::move(job), Napi::Promise::Deferred::New(env)};
  Napi::Promise promise = entry.deferred.Promise();
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
      pause_briefly();
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
    // Idle again before anyone learns of the result: a caller that calls
    // again as soon as it hears must find this thread, not start another.
    ++idle_threads_;
    if (signal_pending_) continue;  // the wake-up on its way settles this one too
    signal_pending_ = true;
    lock.unlock();
    // Fails only once teardown has begun, when stop() takes over.
    finished_signal_.NonBlockingCall([this](Napi::Env env, Napi::Function) { settle_finished(env); });
    lock.lock();
  }
}

void CallRunner::settle_finished(Napi::Env env) {
  std::vector<Entry> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(finished_);
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

void CallRunner::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  work_ready_.notify_all();
  // threads_ changes only on this (the JS) thread.
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace etna::addon
