// Threads that share out the work of one operator (intra-op parallelism),
// drawn from pools that belong to the process, not to a module.
//
// A call runs on the thread that started it (one of the addon's call threads,
// or the caller of executeSync). With numThreads N > 1, operators that split their work do so
// over a pthreadpool of N threads: that calling thread plus N - 1 workers.
// ThreadPools keeps one such pool per thread count in use, at most the
// machine's cores, and every module asking for that count shares it (as
// ExecuTorch's get_threadpool() and onnxruntime's global thread pools are
// shared), so 64 sessions at numThreads 2 start one worker thread, not 64. A
// module may instead take a pool of its own (ThreadPoolKind::kOwn), so that
// no other module's calls wait on it.
//
// pthreadpool runs one parallel operation at a time: a second caller blocks
// on the pool's mutex until the first operation's workers are done. Calls of
// several modules on one shared pool therefore interleave operator by
// operator, each operator using the whole pool (docs/performance.md).
//
// Spinning and sleeping: a worker that has finished an operation spins for
// a while (pthreadpool's spin-wait) waiting for the next, unless that
// operation was flagged PTHREADPOOL_FLAG_YIELD_WORKERS, after which it sleeps
// at once (a futex wait) and the next operation must wake it. Operators of a
// call pass no yield flag, so workers stay ready between them; a
// ThreadPool::Call around the call sends them to sleep when it ends.
#pragma once

#include <pthreadpool.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace etna {

// One pthreadpool: threads() threads counting the caller, so threads() - 1
// workers. The workers are joined when it is destroyed, which happens when
// its last holder lets go (the delegates and module contexts that run on it).
class ThreadPool {
 public:
  // A pool of `threads` (at least 2) threads; null when pthreadpool cannot
  // make one, and then the caller computes alone.
  static std::shared_ptr<ThreadPool> create(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  pthreadpool_t get() const { return pool_; }
  size_t threads() const { return pthreadpool_get_threads_count(pool_); }

  // After a parallel operation, pthreadpool's workers spin for a while
  // waiting for the next one. That is right between the operators of one
  // call, wrong once the call is over: a spinning worker holds a core the
  // JavaScript thread, other calls and other processes want. Sending the
  // workers a job that does nothing, flagged to yield, puts them to sleep
  // now. Blocks while another caller's operation runs on the pool.
  void let_workers_sleep() const;

  // Records that the calling thread just handed `pool` work (an XNNPACK
  // operator or runtime, or parallelize_1d), which woke its workers: the
  // Call around it then sends them to sleep when it ends. Null: nothing.
  static void note_work(pthreadpool_t pool);

  // Marks one call computing on the pool for as long as it lives; when the
  // last call in flight on the pool ends, the workers are sent to sleep if
  // any of the calls since they last slept handed the pool work (note_work
  // on the call's thread). So they spin between the operators of calls, and
  // sleep once none is left; a call that used no worker (a tiny method, or
  // one of portable kernels below their split size) costs no wake-up.
  class Call {
   public:
    explicit Call(ThreadPool* pool);  // null: no pool, nothing to do
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    ThreadPool* pool_;
    bool outer_work_;  // note_work's flag for this thread as it was before this call
  };
  size_t calls_in_flight() const { return calls_.load(std::memory_order_relaxed); }

 private:
  explicit ThreadPool(pthreadpool_t pool) : pool_(pool) {}
  pthreadpool_t pool_;
  std::atomic<size_t> calls_{0};
  std::atomic<bool> worked_since_sleep_{false};
};

// pthreadpool_parallelize_1d for etna's own code: runs task(context, i) for
// every i below `range` on `pool` (on the caller alone when null). Under
// ThreadSanitizer, which cannot see the synchronisation inside pthreadpool (it
// is not built with it), it also declares what pthreadpool guarantees: what
// the caller wrote before the call is seen by every task, and what every task
// wrote is seen by the caller after it. Tasks are not ordered among
// themselves, and nothing here says they are.
void parallelize_1d(pthreadpool_t pool, pthreadpool_task_1d_t task, void* context, size_t range, uint32_t flags = 0);

enum class ThreadPoolKind {
  kShared,  // the process's pool for the thread count, shared with every module asking for it
  kOwn,     // a pool of the module's own
};

// The pools of a process (process()), or of a test. Thread-safe.
class ThreadPools {
 public:
  // Shared pools have at most `max_threads` threads (at least 1).
  explicit ThreadPools(size_t max_threads);
  ThreadPools(const ThreadPools&) = delete;
  ThreadPools& operator=(const ThreadPools&) = delete;

  // The process's pools, capped at default_max_threads(). Never destroyed:
  // modules still alive when the process exits keep their pools, and a
  // static destructor must not join threads a running call is using.
  static ThreadPools& process();
  // The machine's cores (std::thread::hardware_concurrency), at least 1.
  static size_t default_max_threads();

  size_t max_threads() const { return max_threads_; }

  // What a module with `num_threads` runs its calls on: null when that is 1
  // (the calling thread alone); for kShared, the pool of
  // min(num_threads, max_threads()) threads, made on first request and kept
  // while anyone holds it; for kOwn, a new pool of num_threads threads.
  std::shared_ptr<ThreadPool> acquire(size_t num_threads, ThreadPoolKind kind);

  // Shared pools alive now, and the worker threads they hold together.
  size_t shared_pools() const;
  size_t shared_worker_threads() const;

 private:
  const size_t max_threads_;
  mutable std::mutex mutex_;
  // By thread count. Held weakly: a pool goes with its last user.
  std::map<size_t, std::weak_ptr<ThreadPool>> shared_;
};

}  // namespace etna
