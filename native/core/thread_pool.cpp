#include "thread_pool.h"

#include <algorithm>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#define ETNA_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ETNA_THREAD_SANITIZER 1
#endif
#endif

#ifdef ETNA_THREAD_SANITIZER
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
#endif

namespace etna {
namespace {

// Whether the call running on this thread has handed its pool work.
thread_local bool call_handed_work = false;

}  // namespace

#ifdef ETNA_THREAD_SANITIZER
namespace {

struct AnnotatedTask {
  pthreadpool_task_1d_t task;
  void* context;
  char start = 0;  // released by the caller, acquired by every task
  char done = 0;   // released by every task, acquired by the caller
};

void run_annotated(void* annotated, size_t index) {
  auto* a = static_cast<AnnotatedTask*>(annotated);
  __tsan_acquire(&a->start);
  a->task(a->context, index);
  __tsan_release(&a->done);
}

}  // namespace

void parallelize_1d(pthreadpool_t pool, pthreadpool_task_1d_t task, void* context, size_t range, uint32_t flags) {
  if (range > 1) ThreadPool::note_work(pool);
  AnnotatedTask annotated{task, context};
  __tsan_release(&annotated.start);
  pthreadpool_parallelize_1d(pool, run_annotated, &annotated, range, flags);
  __tsan_acquire(&annotated.done);
}
#else
void parallelize_1d(pthreadpool_t pool, pthreadpool_task_1d_t task, void* context, size_t range, uint32_t flags) {
  // A range of one runs on the caller alone: no worker wakes.
  if (range > 1) ThreadPool::note_work(pool);
  pthreadpool_parallelize_1d(pool, task, context, range, flags);
}
#endif

std::shared_ptr<ThreadPool> ThreadPool::create(size_t threads) {
  if (threads < 2) return nullptr;
  pthreadpool_t pool = pthreadpool_create(threads);
  if (!pool) return nullptr;
  std::shared_ptr<ThreadPool> created(new ThreadPool(pool));
  // A new worker spins before its first sleep as after a job (tens of
  // milliseconds), holding a core that the load and the first calls need.
  created->let_workers_sleep();
  return created;
}

ThreadPool::~ThreadPool() { pthreadpool_destroy(pool_); }

void ThreadPool::let_workers_sleep() const {
  // One item per thread, so that every worker takes the job (a range of one
  // item runs on the caller alone) and reads its flag.
  pthreadpool_parallelize_1d(
      pool_, [](void*, size_t) {}, nullptr, threads(), PTHREADPOOL_FLAG_YIELD_WORKERS);
}

void ThreadPool::note_work(pthreadpool_t pool) {
  if (pool) call_handed_work = true;
}

ThreadPool::Call::Call(ThreadPool* pool) : pool_(pool), outer_work_(call_handed_work) {
  call_handed_work = false;
  if (pool_) pool_->calls_.fetch_add(1, std::memory_order_relaxed);
}

ThreadPool::Call::~Call() {
  const bool handed_work = call_handed_work;
  call_handed_work = outer_work_ || handed_work;
  if (!pool_) return;
  if (handed_work) pool_->worked_since_sleep_.store(true);
  // A call starting right after this is harmless: its first operation wakes the workers.
  if (pool_->calls_.fetch_sub(1) == 1 && pool_->worked_since_sleep_.exchange(false)) pool_->let_workers_sleep();
}

ThreadPools::ThreadPools(size_t max_threads) : max_threads_(std::max<size_t>(max_threads, 1)) {}

ThreadPools& ThreadPools::process() {
  static ThreadPools* const pools = new ThreadPools(default_max_threads());
  return *pools;
}

size_t ThreadPools::default_max_threads() { return std::max<size_t>(std::thread::hardware_concurrency(), 1); }

std::shared_ptr<ThreadPool> ThreadPools::acquire(size_t num_threads, ThreadPoolKind kind) {
  if (kind == ThreadPoolKind::kOwn) return ThreadPool::create(num_threads);
  const size_t threads = std::min(num_threads, max_threads_);
  if (threads < 2) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  // Forget pools whose users have all gone.
  for (auto it = shared_.begin(); it != shared_.end();) {
    it = it->second.expired() ? shared_.erase(it) : std::next(it);
  }
  if (auto existing = shared_[threads].lock()) return existing;
  // Made under the lock, so that modules loading at once start one pool.
  auto pool = ThreadPool::create(threads);
  if (pool) {
    shared_[threads] = pool;
  } else {
    shared_.erase(threads);
  }
  return pool;
}

size_t ThreadPools::shared_pools() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& entry : shared_) count += entry.second.expired() ? 0 : 1;
  return count;
}

size_t ThreadPools::shared_worker_threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t workers = 0;
  for (const auto& entry : shared_) {
    if (auto pool = entry.second.lock()) workers += pool->threads() - 1;
  }
  return workers;
}

}  // namespace etna
