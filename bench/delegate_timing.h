// Timing for the delegate benchmarks: a payload from the tests' builder run
// through etna's XNNPACK delegate. On one thread calls are timed in the
// calling thread's CPU time, its cost per call: on a busy machine wall time
// would mostly count the wait for a core. With a pool of more threads the
// work is spread over them, so calls are timed in wall time.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend_test_support.h"

namespace etna::bench {

inline double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

inline double wall_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median over `rounds` rounds (after one warm-up round) of the mean
// milliseconds per call over `calls` calls, on a module of `threads`
// threads (CPU time for 1, wall time otherwise); exits on any failure.
inline double median_ms_per_call(const std::vector<uint8_t>& payload, const test::PayloadBuilder& b,
                                 test::LocalTensor& input, test::LocalTensor& output, int calls, int rounds,
                                 int threads = 1) {
  BackendOptions options;
  options.num_threads = threads;
  xnn::XnnpackModuleContext context(options);
  const auto clock = threads > 1 ? wall_ms : thread_cpu_ms;
  auto delegate = test::make_delegate(payload, context, b.lookup());
  if (!delegate) {
    std::fprintf(stderr, "init failed: %s\n", delegate.error().message.c_str());
    std::exit(1);
  }
  std::vector<double> per_call;
  for (int round = 0; round < rounds + 1; ++round) {
    const double start = clock();
    for (int i = 0; i < calls; ++i) {
      Status ran = test::run_delegate(**delegate, {&input, &output});
      if (!ran) {
        std::fprintf(stderr, "run failed: %s\n", ran.error().message.c_str());
        std::exit(1);
      }
    }
    if (round > 0) per_call.push_back((clock() - start) / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace etna::bench
