// How the portable kernels and the XNNPACK delegate's etna kernels share
// their work with a call's thread pool (null runs everything on the calling
// thread).
//
// A kernel cuts its output into tiles that each write their own outputs, with
// the same order of operations as one thread would use, so results do not
// depend on the number of threads. It asks task_count() how many tasks its
// work is worth: 1 below two tasks' minimum, in which case it runs on the
// calling thread and never touches the pool (waking a worker costs more than
// a small kernel). pthreadpool runs the caller as one of its threads, and
// threads that finish early take tiles left by the others.
#pragma once

#include <pthreadpool.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"

namespace etna {

// Tasks per thread at most: more than one, so a thread that starts late (the
// machine is shared) leaves tiles for the others to take.
constexpr size_t kTasksPerThread = 4;

// The least work worth a task of its own, per kind of kernel, in the units
// its caller counts: about 3 to 30 microseconds on one core of the machine
// measured in docs/xnnpack.md, above what handing a task to a spinning
// worker costs (1 to 2 microseconds). Copies and row quantization split from
// 64 KiB and 16 Ki values: a Llama prefill's [128 x 768] rows then take both
// threads (docs/performance.md).
constexpr size_t kMinTaskIntegerMacs = size_t{1} << 18;  // int8 x int8/int4 multiply-adds (quantized linear, conv)
constexpr size_t kMinTaskFloatMacs = size_t{1} << 16;    // fp32 multiply-adds (matmul, attention)
constexpr size_t kMinTaskBytes = size_t{1} << 16;        // bytes moved (transposes, copies)
constexpr size_t kMinTaskElements = size_t{1} << 14;     // fp32 values quantized per row

// Threads a call on `pool` runs on, the caller included; 1 without a pool.
inline size_t pool_threads(pthreadpool_t pool) { return pool ? pthreadpool_get_threads_count(pool) : 1; }

// Tests only: ignore the minimum work per task, so that even the smallest
// kernels split into as many tiles as their shape allows.
inline std::atomic<bool>& fine_split_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline void force_fine_split(bool on) { fine_split_flag().store(on, std::memory_order_relaxed); }
inline bool fine_split_forced() { return fine_split_flag().load(std::memory_order_relaxed); }

// How many tasks `work` is worth on `pool`: 1 (the calling thread alone)
// without a pool or below two tasks of `min_task_work`; otherwise up to
// kTasksPerThread per thread, a multiple of the thread count when there are
// at least as many tasks as threads, so no thread gets one task more.
inline size_t task_count(pthreadpool_t pool, size_t work, size_t min_task_work) {
  const size_t threads = pool_threads(pool);
  if (threads <= 1) return 1;
  const size_t worth = fine_split_forced() ? work : work / std::max<size_t>(min_task_work, 1);
  if (worth < 2) return 1;
  const size_t tasks = std::min(worth, kTasksPerThread * threads);
  return tasks >= threads ? tasks / threads * threads : tasks;
}

// The pool a kernel split into `tasks` hands them to: none for one task, so
// the calling thread runs it without waking a worker.
inline pthreadpool_t pool_for(pthreadpool_t pool, size_t tasks) { return tasks > 1 ? pool : nullptr; }

inline size_t divide_up(size_t value, size_t divisor) { return (value + divisor - 1) / divisor; }

// Size of each of about `parts` blocks of `extent`, a multiple of `unit`
// (the kernel's tile), at least one unit.
inline size_t block_size(size_t extent, size_t parts, size_t unit) {
  return std::max(unit, divide_up(divide_up(extent, std::max<size_t>(parts, 1)), unit) * unit);
}

// No flags: the kernels keep denormals as one thread does, and workers spin
// between the many small operators of a decode step as XNNPACK's operators
// let them.
constexpr uint32_t kPoolFlags = 0;

// fn(i) for every i < count, each once: on the calling thread in order when
// count < 2 or there is no pool, else spread over the pool's threads
// (through parallelize_1d, which declares pthreadpool's ordering to
// ThreadSanitizer). `fn` must not throw.
template <typename Fn>
void parallel_for(pthreadpool_t pool, size_t count, const Fn& fn) {
  if (!pool || count < 2) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  parallelize_1d(
      pool, [](void* context, size_t i) { (*static_cast<const Fn*>(context))(i); }, const_cast<Fn*>(&fn), count,
      kPoolFlags);
}

// fn(i, j) for every i < count_i, j < count_j; consecutive tasks of a thread
// share i (pthreadpool hands each thread a run of the flattened range).
template <typename Fn>
void parallel_for_2d(pthreadpool_t pool, size_t count_i, size_t count_j, const Fn& fn) {
  parallel_for(pool, count_i * count_j, [&](size_t k) { fn(k / count_j, k % count_j); });
}

}  // namespace etna
