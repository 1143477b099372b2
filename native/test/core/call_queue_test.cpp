// The call threads' policy without N-API: every task runs once and comes
// back to the owner; a thread starts only when the idle ones are spoken for,
// up to the limit; the owner gets one wake-up per batch of finished tasks,
// none while it watches, and learns at the end of a watch of what finished
// during it; a thread that cannot start refuses the task only when no thread
// runs; stopping ends the threads after their current task and drops the rest.
#include "core/call_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "test_support.h"

namespace etna {
namespace {

using namespace std::chrono_literals;
using test::eventually;

// A gate tasks wait at until the test opens it.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

struct Counters {
  std::atomic<int> started{0};
  std::atomic<int> runs{0};
  std::atomic<int> destroyed{0};
  std::atomic<int> wakes{0};
};

class CountingTask : public CallQueue::Task {
 public:
  CountingTask(Counters& counters, int id, Gate* gate = nullptr) : counters_(counters), id_(id), gate_(gate) {}
  ~CountingTask() override { counters_.destroyed.fetch_add(1); }
  void run() override {
    counters_.started.fetch_add(1);
    if (gate_ != nullptr) gate_->wait();
    counters_.runs.fetch_add(1);
  }
  int id() const { return id_; }

 private:
  Counters& counters_;
  int id_;
  Gate* gate_;
};

// Submits task `id`, held at `gate`, and waits until it runs: it then keeps a
// thread busy until the gate opens.
void submit_held(CallQueue& queue, Counters& counters, int id, Gate& gate) {
  const int started = counters.started.load();
  EXPECT_EQ(queue.submit(std::make_unique<CountingTask>(counters, id, &gate)), nullptr);
  ASSERT_TRUE(eventually([&] { return counters.started.load() == started + 1; }));
}

TEST(CallQueue, RunsEveryTaskOnceAndHandsItBackWithOneWakeUpPerBatch) {
  Counters counters;
  Gate gate;
  CallQueue queue(2, [&] { counters.wakes.fetch_add(1); });
  for (int i = 0; i < 6; ++i) EXPECT_EQ(queue.submit(std::make_unique<CountingTask>(counters, i, &gate)), nullptr);
  gate.open();
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 6; }));
  // The first to finish sent the wake-up; the others rode on it.
  EXPECT_EQ(counters.wakes.load(), 1);
  EXPECT_EQ(queue.queued_count(), 0u);
  std::vector<std::unique_ptr<CallQueue::Task>> taken = queue.take_finished();
  ASSERT_EQ(taken.size(), 6u);
  std::vector<bool> seen(6, false);
  for (const auto& task : taken) seen[static_cast<CountingTask&>(*task).id()] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 6);
  EXPECT_EQ(counters.runs.load(), 6);
  EXPECT_EQ(queue.finished_count(), 0u);
  // Once taken, the next finished task sends a new wake-up.
  queue.submit(std::make_unique<CountingTask>(counters, 6));
  ASSERT_TRUE(eventually([&] { return counters.wakes.load() == 2; }));
  EXPECT_EQ(queue.take_finished().size(), 1u);
}

TEST(CallQueue, StartsAThreadOnlyWhenTheIdleOnesAreSpokenForUpToTheLimit) {
  Counters counters;
  Gate first_gate;
  CallQueue queue(3, [] {});
  ASSERT_NO_FATAL_FAILURE(submit_held(queue, counters, 0, first_gate));
  EXPECT_EQ(queue.thread_count(), 1u);
  // The one thread is busy: a second call starts a second thread.
  Gate second_gate;
  ASSERT_NO_FATAL_FAILURE(submit_held(queue, counters, 1, second_gate));
  EXPECT_EQ(queue.thread_count(), 2u);
  first_gate.open();
  second_gate.open();
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 2 && queue.idle_threads() == 2; }));
  queue.take_finished();
  // Two idle threads: calls one at a time start no more.
  for (int i = 2; i < 12; ++i) {
    queue.submit(std::make_unique<CountingTask>(counters, i));
    ASSERT_TRUE(eventually([&] { return queue.finished_count() == 1; }));
    queue.take_finished();
  }
  EXPECT_EQ(queue.thread_count(), 2u);
  // Many calls at once: never more than the limit.
  Gate many_gate;
  for (int i = 12; i < 20; ++i) queue.submit(std::make_unique<CountingTask>(counters, i, &many_gate));
  ASSERT_TRUE(eventually([&] { return counters.started.load() == 15; }));
  EXPECT_EQ(queue.thread_count(), 3u);
  many_gate.open();
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 8; }));
  EXPECT_EQ(queue.thread_count(), 3u);
}

TEST(CallQueue, SendsNoWakeUpWhileTheOwnerWatchesAndTellsWhatFinishedDuringTheWatch) {
  Counters counters;
  CallQueue queue(1, [&] { counters.wakes.fetch_add(1); });
  EXPECT_TRUE(queue.start_watching());
  EXPECT_FALSE(queue.start_watching());  // already on
  EXPECT_FALSE(queue.stop_watching());   // nothing finished
  EXPECT_TRUE(queue.start_watching());
  queue.submit(std::make_unique<CountingTask>(counters, 0));
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 1; }));
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(counters.wakes.load(), 0);
  // Finished during the watch, no wake-up sent: the owner is told, once.
  EXPECT_TRUE(queue.stop_watching());
  queue.start_watching();
  EXPECT_FALSE(queue.stop_watching());  // counted as sent until taken
  EXPECT_EQ(queue.take_finished().size(), 1u);
  // Taken while watching: nothing to tell at the end.
  queue.start_watching();
  queue.submit(std::make_unique<CountingTask>(counters, 1));
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 1; }));
  EXPECT_EQ(queue.take_finished().size(), 1u);
  EXPECT_FALSE(queue.stop_watching());
  EXPECT_EQ(counters.wakes.load(), 0);
}

TEST(CallQueue, RefusesATaskOnlyWhenNoThreadRunsAndNoneCanStart) {
  Counters counters;
  std::atomic<bool> can_start{false};
  CallQueue::StartThread start = [&](std::function<void()> body) {
    if (!can_start.load()) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    return std::thread(std::move(body));
  };
  CallQueue queue(
      4, [] {}, start);
  std::unique_ptr<CallQueue::Task> refused = queue.submit(std::make_unique<CountingTask>(counters, 0));
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(static_cast<CountingTask&>(*refused).id(), 0);
  EXPECT_EQ(queue.queued_count(), 0u);
  EXPECT_EQ(queue.thread_count(), 0u);

  can_start = true;
  Gate gate;
  ASSERT_NO_FATAL_FAILURE(submit_held(queue, counters, 1, gate));
  // A thread runs: a task that cannot get a thread of its own waits for it.
  can_start = false;
  EXPECT_EQ(queue.submit(std::make_unique<CountingTask>(counters, 2)), nullptr);
  EXPECT_EQ(queue.thread_count(), 1u);
  gate.open();
  ASSERT_TRUE(eventually([&] { return queue.finished_count() == 2; }));
  EXPECT_EQ(counters.runs.load(), 2);
}

TEST(CallQueue, StopEndsTheThreadsAfterTheirCurrentTaskAndDropsTheRest) {
  Counters counters;
  Gate gate;
  {
    CallQueue queue(1, [] {});
    ASSERT_NO_FATAL_FAILURE(submit_held(queue, counters, 0, gate));
    for (int i = 1; i < 4; ++i) queue.submit(std::make_unique<CountingTask>(counters, i));
    std::thread opener([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
    queue.stop();
    opener.join();
    EXPECT_EQ(counters.runs.load(), 1);
    EXPECT_EQ(queue.queued_count(), 3u);
    queue.stop();  // a second stop does nothing
  }
  // The queued and the finished tasks go with the queue.
  EXPECT_EQ(counters.destroyed.load(), 4);
}

}  // namespace
}  // namespace etna
