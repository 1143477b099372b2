// The process's thread pools: one pool per thread count, shared by everyone
// who asks for that count and capped at the machine's cores; pools of one's
// own on request; each pool's workers gone with its last holder; a pool
// runs exactly its thread count at once, and callers on several threads
// take turns on it.
//
// Tasks run through etna::parallelize_1d, which tells ThreadSanitizer the
// ordering pthreadpool (not built with it) provides.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "test_support.h"

namespace etna {
namespace {

using test::process_threads;

// The most tasks of `tasks` that ran at once: each task waits (up to a
// deadline) until `wanted` have been running at once, so that tasks on
// distinct threads overlap.
struct Overlap {
  std::atomic<size_t> running{0};
  std::atomic<size_t> most{0};
  size_t wanted = 0;
};

size_t most_at_once(pthreadpool_t pool, size_t tasks, size_t wanted) {
  Overlap overlap;
  overlap.wanted = wanted;
  parallelize_1d(
      pool,
      [](void* context, size_t) {
        auto& o = *static_cast<Overlap*>(context);
        const size_t now = ++o.running;
        size_t seen = o.most.load();
        while (seen < now && !o.most.compare_exchange_weak(seen, now)) {
        }
        // Long enough for a busy machine to schedule every worker.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (o.most.load() < o.wanted && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        --o.running;
      },
      &overlap, tasks, 0);
  return overlap.most.load();
}

TEST(ThreadPools, OneSharedPoolPerThreadCount) {
  ThreadPools pools(4);
  auto a = pools.acquire(2, ThreadPoolKind::kShared);
  auto b = pools.acquire(2, ThreadPoolKind::kShared);
  auto c = pools.acquire(3, ThreadPoolKind::kShared);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a->threads(), 2u);
  EXPECT_EQ(c->threads(), 3u);
  EXPECT_EQ(pools.shared_pools(), 2u);
  EXPECT_EQ(pools.shared_worker_threads(), 1u + 2u);
}

TEST(ThreadPools, SharedPoolsStopAtTheCap) {
  ThreadPools pools(4);
  auto four = pools.acquire(4, ThreadPoolKind::kShared);
  auto many = pools.acquire(64, ThreadPoolKind::kShared);
  ASSERT_TRUE(four && many);
  EXPECT_EQ(four, many);
  EXPECT_EQ(many->threads(), 4u);
  EXPECT_EQ(pools.shared_pools(), 1u);
  // A cap of one leaves every call on its caller.
  ThreadPools single(1);
  EXPECT_EQ(single.acquire(8, ThreadPoolKind::kShared), nullptr);
  EXPECT_EQ(ThreadPools(0).max_threads(), 1u);
}

TEST(ThreadPools, OneThreadIsTheCallerAlone) {
  ThreadPools pools(4);
  EXPECT_EQ(pools.acquire(1, ThreadPoolKind::kShared), nullptr);
  EXPECT_EQ(pools.acquire(1, ThreadPoolKind::kOwn), nullptr);
  EXPECT_EQ(pools.acquire(0, ThreadPoolKind::kShared), nullptr);
  EXPECT_EQ(pools.shared_pools(), 0u);
}

TEST(ThreadPools, OwnPoolsAreNobodyElses) {
  ThreadPools pools(2);
  auto shared = pools.acquire(2, ThreadPoolKind::kShared);
  auto own = pools.acquire(2, ThreadPoolKind::kOwn);
  auto other = pools.acquire(2, ThreadPoolKind::kOwn);
  ASSERT_TRUE(shared && own && other);
  EXPECT_NE(own, shared);
  EXPECT_NE(own, other);
  EXPECT_EQ(pools.shared_pools(), 1u);  // own pools are not the process's to share
  // An own pool has the threads asked for, past the shared cap.
  auto wide = pools.acquire(3, ThreadPoolKind::kOwn);
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->threads(), 3u);
}

TEST(ThreadPools, ProcessPoolsStopAtTheCores) {
  const size_t cores = std::max<unsigned>(std::thread::hardware_concurrency(), 1u);
  EXPECT_EQ(ThreadPools::default_max_threads(), cores);
  EXPECT_EQ(ThreadPools::process().max_threads(), cores);
  EXPECT_EQ(&ThreadPools::process(), &ThreadPools::process());
}

TEST(ThreadPools, WorkersGoWithTheLastHolder) {
  ThreadPools pools(8);
  const size_t before = test::settled_process_threads();
  auto first = pools.acquire(3, ThreadPoolKind::kShared);
  ASSERT_TRUE(first);
  EXPECT_EQ(process_threads(), before + 2);  // the caller is the third thread
  auto second = pools.acquire(3, ThreadPoolKind::kShared);
  std::weak_ptr<ThreadPool> watch = first;
  first.reset();
  EXPECT_FALSE(watch.expired());  // still held by `second`
  EXPECT_EQ(pools.shared_pools(), 1u);
  second.reset();
  EXPECT_TRUE(watch.expired());
  // Joined when destroyed, and listed a moment longer.
  test::eventually([&] { return process_threads() == before; });
  EXPECT_EQ(process_threads(), before);
  EXPECT_EQ(pools.shared_pools(), 0u);
  // Asking again starts a new pool.
  auto again = pools.acquire(3, ThreadPoolKind::kShared);
  ASSERT_TRUE(again);
  EXPECT_EQ(process_threads(), before + 2);
}

TEST(ThreadPools, AnOperationRunsOnExactlyThePoolsThreads) {
  ThreadPools pools(8);
  for (size_t threads : {2u, 3u}) {
    auto pool = pools.acquire(threads, ThreadPoolKind::kShared);
    ASSERT_TRUE(pool);
    // Every thread of the pool takes a task, and no more threads than that do.
    EXPECT_EQ(most_at_once(pool->get(), threads, threads), threads);
    EXPECT_EQ(most_at_once(pool->get(), 4 * threads, threads), threads);
  }
}

TEST(ThreadPools, CallersOnManyThreadsTakeTurns) {
  ThreadPools pools(2);
  auto pool = pools.acquire(2, ThreadPoolKind::kShared);
  ASSERT_TRUE(pool);
  constexpr size_t kCallers = 6, kRounds = 100, kItems = 64;
  std::atomic<size_t> wrong{0};
  std::vector<std::thread> callers;
  for (size_t caller = 0; caller < kCallers; ++caller) {
    callers.emplace_back([&, caller] {
      for (size_t round = 0; round < kRounds; ++round) {
        struct Sum {
          std::atomic<size_t> total{0};
          size_t base = 0;
        } sum;
        sum.base = caller * 1000 + round;
        parallelize_1d(
            pool->get(),
            [](void* context, size_t i) {
              auto& s = *static_cast<Sum*>(context);
              s.total += s.base + i;
            },
            &sum, kItems, 0);
        if (sum.total.load() != kItems * sum.base + kItems * (kItems - 1) / 2) ++wrong;
        if (round % 16 == 0) pool->let_workers_sleep();
      }
    });
  }
  for (auto& thread : callers) thread.join();
  EXPECT_EQ(wrong.load(), 0u);
}

void add_up(pthreadpool_t pool) {
  std::atomic<size_t> total{0};
  parallelize_1d(
      pool, [](void* context, size_t i) { *static_cast<std::atomic<size_t>*>(context) += i; }, &total, 256, 0);
}

// A pool of its own with two threads, and the id of its one worker.
struct OwnPoolOfTwo {
  ThreadPools pools{2};
  std::shared_ptr<ThreadPool> pool;
  std::string worker;
};

void acquire_pool(OwnPoolOfTwo& own) {
  test::settled_process_threads();
  const auto before = test::thread_ids();
  own.pool = own.pools.acquire(2, ThreadPoolKind::kOwn);
  ASSERT_TRUE(own.pool);
  const auto workers = test::threads_added(before, test::thread_ids());
  ASSERT_EQ(workers.size(), 1u);
  own.worker = workers[0];
}

// A new pool's workers sleep at once. pthreadpool starts each worker as if
// it had just finished a job, spinning (about a million pause instructions,
// tens of milliseconds) before its first sleep: on a small machine that held
// a core through the rest of a module's load and its first calls. Measured
// from when the pool is there: the worker's start before it, which an
// emulator (QEMU) makes take milliseconds, is not the spin.
TEST(ThreadPools, ANewPoolsWorkersSleepAtOnce) {
  OwnPoolOfTwo own;
  ASSERT_NO_FATAL_FAILURE(acquire_pool(own));
  const double started = test::thread_run_ms(own.worker);
  ASSERT_GE(started, 0.0) << "no schedstat for the worker";
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_LT(test::thread_run_ms(own.worker) - started, 5.0);
}

// Calls with idle gaps between them, as a server's: when each call ends, its
// worker goes to sleep instead of spinning into the gap. Only the gaps are
// measured: within a call the worker spins between operations by design.
TEST(ThreadPools, WorkersSleepWhenTheLastCallEnds) {
  OwnPoolOfTwo own;
  ASSERT_NO_FATAL_FAILURE(acquire_pool(own));
  ASSERT_GE(test::thread_run_ms(own.worker), 0.0) << "no schedstat for the worker";
  double in_gaps = 0;
  for (int call = 0; call < 20; ++call) {
    {
      const ThreadPool::Call running(own.pool.get());
      for (int op = 0; op < 4; ++op) add_up(own.pool->get());
    }
    const double gap_start = test::thread_run_ms(own.worker);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    in_gaps += test::thread_run_ms(own.worker) - gap_start;
  }
  // A worker left spinning runs for most of each gap (pthreadpool spins about
  // a million pause instructions before it sleeps): hundreds of milliseconds.
  EXPECT_LT(in_gaps, 20.0);
}

// A call that hands the pool no work (a tiny method) leaves its sleeping
// workers asleep: sending them to sleep again would wake each one first.
// A call that does hand it work still sends them to sleep when it ends.
TEST(ThreadPools, CallsThatHandThePoolNoWorkLeaveItsWorkersAsleep) {
  OwnPoolOfTwo own;
  ASSERT_NO_FATAL_FAILURE(acquire_pool(own));
  own.pool->let_workers_sleep();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double asleep = test::thread_run_ms(own.worker);
  ASSERT_GE(asleep, 0.0) << "no schedstat for the worker";
  for (int call = 0; call < 2000; ++call) {
    const ThreadPool::Call running(own.pool.get());
    parallelize_1d(
        own.pool->get(), [](void*, size_t) {}, nullptr, 1, 0);  // one item: the caller alone
  }
  // 2000 wake-ups would take milliseconds of the worker's time.
  EXPECT_LT(test::thread_run_ms(own.worker) - asleep, 0.5);
  {
    const ThreadPool::Call running(own.pool.get());
    add_up(own.pool->get());
    {
      const ThreadPool::Call inner(own.pool.get());  // as a delegate's, inside its method's call
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double after_work = test::thread_run_ms(own.worker);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_LT(test::thread_run_ms(own.worker) - after_work, 2.0);  // not spinning through the gap
}

// Calls are counted while they compute on the pool; only the last one out
// sends the workers to sleep, and overlapping calls on several threads keep
// the pool working.
TEST(ThreadPools, CallsInFlightAreCounted) {
  ThreadPools pools(2);
  auto pool = pools.acquire(2, ThreadPoolKind::kShared);
  ASSERT_TRUE(pool);
  {
    const ThreadPool::Call first(pool.get());
    {
      const ThreadPool::Call second(pool.get());
      EXPECT_EQ(pool->calls_in_flight(), 2u);
    }
    EXPECT_EQ(pool->calls_in_flight(), 1u);
    const ThreadPool::Call none(nullptr);  // no pool: nothing counted
    EXPECT_EQ(pool->calls_in_flight(), 1u);
  }
  EXPECT_EQ(pool->calls_in_flight(), 0u);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop.load()) {
      const ThreadPool::Call running(pool.get());
      add_up(pool->get());
    }
  });
  for (int call = 0; call < 50; ++call) {
    const ThreadPool::Call running(pool.get());
    add_up(pool->get());
  }
  stop = true;
  other.join();
  EXPECT_EQ(pool->calls_in_flight(), 0u);
  EXPECT_EQ(most_at_once(pool->get(), 2, 2), 2u);  // woken again by the next operation
}

TEST(ThreadPools, SleepingWorkersWakeForTheNextOperation) {
  ThreadPools pools(2);
  auto pool = pools.acquire(2, ThreadPoolKind::kShared);
  ASSERT_TRUE(pool);
  pool->let_workers_sleep();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(most_at_once(pool->get(), 2, 2), 2u);
}

}  // namespace
}  // namespace etna
