#include "call_queue.h"

#include <pthread.h>

#include <system_error>

namespace etna {

CallQueue::CallQueue(size_t max_threads, Wake wake, StartThread start_thread)
    : max_threads_(max_threads == 0 ? 1 : max_threads),
      wake_(std::move(wake)),
      start_thread_(std::move(start_thread)) {}

CallQueue::~CallQueue() { stop(); }

std::unique_ptr<CallQueue::Task> CallQueue::submit(std::unique_ptr<Task> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(task));
    if (queued_.size() > idle_threads_ && threads_.size() < max_threads_) {
      try {
        threads_.push_back(start_thread_([this] { thread_main(); }));
      } catch (const std::system_error&) {
        // With threads running, they take it in turn; with none, it is refused.
        if (threads_.empty()) return queued_.pop_back();
      }
    }
  }
  work_ready_.notify_one();
  return nullptr;
}

void CallQueue::thread_main() {
#ifdef __linux__
  // Named, so that profilers, top and tests can tell etna's call threads from Node's own.
  pthread_setname_np(pthread_self(), "etna-call");
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  ++idle_threads_;
  for (;;) {
    lock.unlock();
    const auto watch_until = std::chrono::steady_clock::now() + kWatchBeforeSleep;
    while (queued_.count() == 0 && !stopping_.load(std::memory_order_relaxed) &&
           std::chrono::steady_clock::now() < watch_until) {
      // Gives way rather than only pause: the owner may be waiting for this
      // very core (the scheduler tends to wake a thread on its waker's
      // core), and it is the one that brings the next call.
      std::this_thread::yield();
    }
    lock.lock();
    work_ready_.wait(lock, [this] { return stopping_.load() || !queued_.empty(); });
    if (stopping_.load()) return;
    --idle_threads_;
    std::unique_ptr<Task> task = queued_.pop_front();
    lock.unlock();
    task->run();
    lock.lock();
    finished_.push_back(std::move(task));
    // Idle again before anyone learns of the result: a caller that calls
    // again as soon as it hears must find this thread, not start another.
    ++idle_threads_;
    if (wake_sent_ || owner_watching_) continue;
    wake_sent_ = true;
    lock.unlock();
    wake_();
    lock.lock();
  }
}

std::vector<std::unique_ptr<CallQueue::Task>> CallQueue::take_finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  wake_sent_ = false;
  std::vector<std::unique_ptr<Task>> taken;
  taken.reserve(finished_.size());
  for (auto& task : finished_.take_all()) taken.push_back(std::move(task));
  return taken;
}

bool CallQueue::start_watching() {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool began = !owner_watching_;
  owner_watching_ = true;
  return began;
}

bool CallQueue::stop_watching() {
  std::lock_guard<std::mutex> lock(mutex_);
  owner_watching_ = false;
  if (finished_.empty() || wake_sent_) return false;
  wake_sent_ = true;
  return true;
}

size_t CallQueue::thread_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

size_t CallQueue::idle_threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_threads_;
}

void CallQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_.load()) return;
    stopping_.store(true);
  }
  work_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace etna
