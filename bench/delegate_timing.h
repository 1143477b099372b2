// Timing for the delegate benchmarks: a payload from the tests' builder run
// through etna's XNNPACK delegate, one thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend_test_support.h"

namespace etna::bench {

// Median over `rounds` rounds (after one warm-up round) of the mean
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
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      Status ran = test::run_delegate(**delegate, {&input, &output});
      if (!ran) {
        std::fprintf(stderr, "run failed: %s\n", ran.error().message.c_str());
        std::exit(1);
      }
    }
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    if (round > 0) per_call.push_back(elapsed.count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace etna::bench
