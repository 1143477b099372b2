// Timing for the delegate benchmarks: a payload from the tests' builder run
// through etna's XNNPACK delegate on the calling thread. Calls are timed in
// that thread's CPU time, its cost per call: on a busy machine wall time would
// mostly count the wait for a core.
#pragma once

#include <algorithm>
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

// Median over `rounds` rounds (after one warm-up round) of the mean CPU
// milliseconds per call over `calls` calls; exits on any failure.
inline double median_ms_per_call(const std::vector<uint8_t>& payload, const test::PayloadBuilder& b,
                                 test::LocalTensor& input, test::LocalTensor& output, int calls, int rounds) {
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = test::make_delegate(payload, context, b.lookup());
  if (!delegate) {
    std::fprintf(stderr, "init failed: %s\n", delegate.error().message.c_str());
    std::exit(1);
  }
  std::vector<double> per_call;
  for (int round = 0; round < rounds + 1; ++round) {
    const double start = thread_cpu_ms();
    for (int i = 0; i < calls; ++i) {
      Status ran = test::run_delegate(**delegate, {&input, &output});
      if (!ran) {
        std::fprintf(stderr, "run failed: %s\n", ran.error().message.c_str());
        std::exit(1);
      }
    }
    if (round > 0) per_call.push_back((thread_cpu_ms() - start) / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace etna::bench
