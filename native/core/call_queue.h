// The policy of the addon's call threads, as plain C++ (no N-API, no libuv):
// which thread takes a call, when a thread starts, how long a thread watches
// for the next call before it sleeps, and when the owner (the JS thread) must
// be woken to collect finished calls. native/addon/call_runner.cpp puts
// promises and the event loop around it.
//
// Why call threads of their own rather than libuv's pool: waking a sleeping
// thread costs more than a small model's whole call (a round trip on et_add
// took 35 µs, the call itself 4). A call thread that has just finished a call
// watches the queue for a short while before it sleeps, so a caller that
// calls again at once (a stream of small steps) finds it awake.
//
// Waking the owner costs about as much again, so the owner may watch for
// results instead (`start_watching`): finishing threads then leave the
// results for it without a wake-up. Otherwise the first call to finish sends
// one wake-up (`Wake`), and every call that finishes before the owner takes
// them rides on it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace etna {

// A list whose size may be read without the lock that guards it: every
// change goes through here, so the count never drifts from the list.
template <typename T>
class CountedList {
 public:
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  // The size as of the last change, read from any thread without the lock.
  size_t count() const { return count_.load(std::memory_order_acquire); }
  void push_back(T item) {
    items_.push_back(std::move(item));
    recount();
  }
  T pop_front() {
    T item = std::move(items_.front());
    items_.pop_front();
    recount();
    return item;
  }
  T pop_back() {
    T item = std::move(items_.back());
    items_.pop_back();
    recount();
    return item;
  }
  std::deque<T> take_all() {
    std::deque<T> all;
    all.swap(items_);
    recount();
    return all;
  }

 private:
  void recount() { count_.store(items_.size(), std::memory_order_release); }
  std::deque<T> items_;
  std::atomic<size_t> count_{0};
};

class CallQueue {
 public:
  // One call's work, run on a call thread.
  class Task {
   public:
    virtual ~Task() = default;
    virtual void run() = 0;
  };
  // Asks the owner, from a call thread, to take what has finished. At most
  // one is on its way at a time: the next comes after take_finished().
  using Wake = std::function<void()>;
  // Starts a thread running `body`; throws std::system_error when it cannot.
  using StartThread = std::function<std::thread(std::function<void()> body)>;

  // How long a call thread watches for the next call before it sleeps:
  // about what one wake-up of a sleeping thread costs on the machines
  // measured, so a thread that waited in vain spent what a wake-up would have.
  static constexpr std::chrono::microseconds kWatchBeforeSleep{25};

  CallQueue(size_t max_threads, Wake wake, StartThread start_thread = start_std_thread);
  // Stops: see stop().
  ~CallQueue();
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues `task`, and starts a thread when every idle one is spoken for and
  // fewer than max_threads run. Gives the task back when no thread runs and
  // none could be started; otherwise null (the running threads take it).
  std::unique_ptr<Task> submit(std::unique_ptr<Task> task);

  // Owner: every finished task, in the order they finished. A wake-up sent
  // before this is spent; the next finished task sends a new one.
  std::vector<std::unique_ptr<Task>> take_finished();

  // Owner: finishing tasks send no wake-up until stop_watching(). True when
  // this begins a watch, false when one was already on.
  bool start_watching();
  // Owner: ends the watch. True when tasks that finished during it wait with
  // no wake-up on its way: one is then counted as sent, and the owner sends
  // it or takes the tasks itself (none other comes until take_finished()).
  bool stop_watching();

  // Read without the lock: how many tasks wait for a thread, and how many
  // have finished and wait for the owner.
  size_t queued_count() const { return queued_.count(); }
  size_t finished_count() const { return finished_.count(); }
  size_t thread_count() const;
  size_t idle_threads() const;

  // Stops the threads once their current task ends and joins them; queued
  // tasks are dropped. Owner only; once.
  void stop();

  static std::thread start_std_thread(std::function<void()> body) { return std::thread(std::move(body)); }

 private:
  void thread_main();

  const size_t max_threads_;
  const Wake wake_;
  const StartThread start_thread_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  CountedList<std::unique_ptr<Task>> queued_;
  CountedList<std::unique_ptr<Task>> finished_;
  // How the owner learns of finished tasks: a wake-up is on its way, or it
  // is watching; with neither, the next finished task sends a wake-up.
  bool wake_sent_ = false;
  bool owner_watching_ = false;
  std::atomic<bool> stopping_{false};
  size_t idle_threads_ = 0;
  std::vector<std::thread> threads_;  // changes on the owner's thread only
};

}  // namespace etna
