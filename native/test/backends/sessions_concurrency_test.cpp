// Many modules over one program, as a server keeps one per stream: modules
// loaded and called on their own threads at the same time give exactly what
// one module run alone gives. Built with ThreadSanitizer (npm run test:tsan),
// they also check the sharing (packed weights per program, the call
// lease, memory reports, the process's thread pools) for data races.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/module.h"
#include "core/program.h"
#include "core/thread_pool.h"
#include "test_support.h"

namespace etna {
namespace {

using test::load_program;

constexpr int kModules = 8;
constexpr int kRounds = 24;  // distinct inputs each module runs through
constexpr int kPasses = 4;   // times each module runs through them

// One method's call: its name and the float inputs (shape, values) it takes.
struct CallShape {
  std::string method;
  std::vector<std::vector<int64_t>> input_shapes;
};

size_t element_count(const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t dim : shape) count *= static_cast<size_t>(dim);
  return count;
}

// Deterministic inputs, different in every round.
std::vector<std::vector<float>> inputs_for(const CallShape& call, int round) {
  std::vector<std::vector<float>> inputs;
  uint32_t state = 2654435761u * static_cast<uint32_t>(round + 1);
  for (const auto& shape : call.input_shapes) {
    std::vector<float> values(element_count(shape));
    for (float& v : values) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
    }
    inputs.push_back(std::move(values));
  }
  return inputs;
}

// Runs one call; on success returns every output's bytes, concatenated.
Result<std::vector<uint8_t>> run_call(Module& module, const CallShape& call, int round) {
  const auto values = inputs_for(call, round);
  std::vector<InputValue> inputs(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    inputs[i].kind = InputValue::Kind::kTensor;
    inputs[i].tensor.dtype = ScalarType::kFloat;
    inputs[i].tensor.shape = call.input_shapes[i];
    inputs[i].tensor.data = values[i].data();
    inputs[i].tensor.nbytes = values[i].size() * sizeof(float);
  }
  auto capacities = module.output_capacities(call.method);
  if (!capacities) return capacities.error();
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<OutputBuffer> buffers;
  for (size_t capacity : *capacities) outputs.emplace_back(capacity);
  for (auto& bytes : outputs) buffers.push_back(OutputBuffer{bytes.data(), bytes.size()});
  auto written = module.execute(call.method, inputs, buffers);
  if (!written) return written.error();
  std::vector<uint8_t> all;
  for (size_t i = 0; i < outputs.size(); ++i) {
    all.insert(all.end(), outputs[i].begin(), outputs[i].begin() + static_cast<long>((*written)[i].nbytes));
  }
  return all;
}

std::unique_ptr<Module> load_module(const std::shared_ptr<const Program>& program, ArenaSharing sharing,
                                    int num_threads = 1, ThreadPoolKind pool = ThreadPoolKind::kShared) {
  ModuleOptions options;
  options.sharing = sharing;
  options.num_threads = num_threads;
  options.thread_pool = pool;
  auto module = Module::load(program, options);
  EXPECT_TRUE(module) << (module ? "" : module.error().message);
  return module ? std::move(*module) : nullptr;
}

// What a lone module gives for every (call, round), run serially on this
// thread, over its own copy of the program (so that the program the threads
// share is first used by them: its backend context and packing start there).
std::vector<std::vector<std::vector<uint8_t>>> serial_reference(const std::string& file,
                                                                const std::vector<CallShape>& calls) {
  std::vector<std::vector<std::vector<uint8_t>>> expected(calls.size());
  auto program = load_program(file);
  if (!program) return expected;
  auto module = load_module(program, ArenaSharing::kAuto);
  if (!module) return expected;
  for (size_t c = 0; c < calls.size(); ++c) {
    for (int round = 0; round < kRounds; ++round) {
      auto out = run_call(*module, calls[c], round);
      EXPECT_TRUE(out) << calls[c].method << ": " << (out ? "" : out.error().message);
      expected[c].push_back(out ? *out : std::vector<uint8_t>{});
    }
  }
  return expected;
}

// Holds threads until all of them have arrived, so that their calls overlap.
class StartLine {
 public:
  explicit StartLine(int threads) : waiting_(threads) {}
  void arrive_and_wait() {
    waiting_.fetch_sub(1);
    while (waiting_.load() > 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> waiting_;
};

// Starts `count` threads running `work(index)` and waits for all of them.
void run_threads(int count, const std::function<void(int)>& work) {
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) threads.emplace_back(work, i);
  for (auto& thread : threads) thread.join();
}

// Every thread loads its own module over the one program (so loading, packing
// and first method loads overlap too), waits for the others, then runs every
// round of every call several times; stream i starts at round i so that
// different inputs run at once.
void expect_streams_match_a_lone_module(const std::string& file, const std::vector<CallShape>& calls,
                                        ArenaSharing sharing, int num_threads = 1) {
  auto program = load_program(file);
  ASSERT_TRUE(program);
  const auto expected = serial_reference(file, calls);
  std::atomic<int> mismatches{0}, failures{0};
  StartLine start(kModules);
  run_threads(kModules, [&](int stream) {
    auto module = load_module(program, sharing, num_threads);
    start.arrive_and_wait();
    if (!module) {
      ++failures;
      return;
    }
    for (int step = 0; step < kPasses * kRounds; ++step) {
      const int round = (stream + step) % kRounds;
      for (size_t c = 0; c < calls.size(); ++c) {
        auto out = run_call(*module, calls[c], round);
        if (!out) {
          ++failures;
          ADD_FAILURE() << file << " " << calls[c].method << ": " << out.error().message;
        } else if (*out != expected[c][static_cast<size_t>(round)]) {
          ++mismatches;
        }
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "outputs that differ from a lone module's";
}

TEST(SessionsConcurrency, DelegatedLinearModulesMatchALoneModule) {
  ETNA_REQUIRE_TESTDATA();
  for (ArenaSharing sharing : {ArenaSharing::kOn, ArenaSharing::kOff}) {
    expect_streams_match_a_lone_module("djl_lin129_planned.pte", {{"forward", {{129}}}}, sharing);
  }
}

// Each module with its own XNNPACK thread pool of two threads.
TEST(SessionsConcurrency, DelegatedModulesWithThreadPoolsMatchALoneModule) {
  ETNA_REQUIRE_TESTDATA();
  expect_streams_match_a_lone_module("djl_lin129_planned.pte", {{"forward", {{129}}}}, ArenaSharing::kOn, 2);
}

TEST(SessionsConcurrency, DelegatedConvolutionModulesMatchALoneModule) {
  ETNA_REQUIRE_TESTDATA();
  expect_streams_match_a_lone_module("djl_conv_xnnpack.pte", {{"forward", {{1, 3, 16, 16}}}}, ArenaSharing::kOn);
}

// Both methods of one program, interleaved, through different modules at once.
TEST(SessionsConcurrency, MethodsOfOneProgramThroughManyModules) {
  ETNA_REQUIRE_TESTDATA();
  expect_streams_match_a_lone_module("npr_multi_method.pte", {{"forward", {{2}}}, {"double", {{2}}}},
                                     ArenaSharing::kOn);
}

// Threads racing for one module: each call either runs (and is right) or is
// refused by the call lease, never both at once; memory reports are read
// meanwhile from another thread, as the API allows at any time.
TEST(SessionsConcurrency, CallsRacingForOneModuleTakeTurnsOrAreRefused) {
  ETNA_REQUIRE_TESTDATA();
  const std::vector<CallShape> calls{{"forward", {{129}}}};
  const auto expected = serial_reference("djl_lin129_planned.pte", calls);
  auto program = load_program("djl_lin129_planned.pte");
  ASSERT_TRUE(program);
  auto module = load_module(program, ArenaSharing::kOn);
  ASSERT_TRUE(module);
  std::atomic<int> ran{0}, refused{0}, wrong{0};
  std::atomic<bool> calling{true};
  StartLine start(5);
  std::thread reporter([&] {
    start.arrive_and_wait();
    while (calling.load()) {
      const MemoryReport report = module->memory_report();
      if (report.packed_weight_bytes == 0) ++wrong;
    }
  });
  run_threads(4, [&](int thread) {
    start.arrive_and_wait();
    for (int step = 0; step < kPasses * kRounds; ++step) {
      const int round = (thread * 5 + step) % kRounds;
      auto out = run_call(*module, calls[0], round);
      if (out) {
        ++ran;
        if (*out != expected[0][static_cast<size_t>(round)]) ++wrong;
      } else if (out.error().code == ErrorCode::kInternal) {
        ++refused;
      } else {
        ++wrong;
      }
    }
  });
  calling = false;
  reporter.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ran.load() + refused.load(), 4 * kPasses * kRounds);
  EXPECT_GT(ran.load(), 0);
}

// As the addon does: a call begins on one thread and runs (and gives its
// lease back) on another, while other modules over the program run.
TEST(SessionsConcurrency, CallsBegunOnOneThreadRunOnAnother) {
  ETNA_REQUIRE_TESTDATA();
  const CallShape call{"forward", {{129}}};
  const auto expected = serial_reference("djl_lin129_planned.pte", {call});
  auto program = load_program("djl_lin129_planned.pte");
  ASSERT_TRUE(program);
  std::atomic<int> mismatches{0}, failures{0};
  StartLine start(kModules / 2);
  run_threads(kModules / 2, [&](int stream) {
    auto module = load_module(program, ArenaSharing::kAuto);
    start.arrive_and_wait();
    if (!module) {
      ++failures;
      return;
    }
    std::vector<uint8_t> output(64 * sizeof(float));
    for (int step = 0; step < kRounds; ++step) {
      const int round = (stream + step) % kRounds;
      const auto values = inputs_for(call, round);
      InputValue input;
      input.kind = InputValue::Kind::kTensor;
      input.tensor.shape = call.input_shapes[0];
      input.tensor.data = values[0].data();
      input.tensor.nbytes = values[0].size() * sizeof(float);
      auto begun = module->begin_call(call.method, {input}, {OutputBuffer{output.data(), output.size()}});
      if (!begun) {
        ++failures;
        continue;
      }
      std::unique_ptr<Module::Call> pending = std::move(*begun);
      std::thread worker([&] {
        if (!pending->run()) ++failures;
        pending.reset();  // the lease goes back on the worker
      });
      worker.join();
      if (output != expected[0][static_cast<size_t>(round)]) ++mismatches;
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

// ---------------------------------------------------------------- thread pools

const CallShape kConvolution{"forward", {{1, 3, 16, 16}}};

size_t cores() { return ThreadPools::default_max_threads(); }

// The convolution program the pool tests load their modules over, and what a
// lone module gives for kConvolution (computed first, as serial_reference says).
struct ConvolutionModules {
  std::vector<std::vector<std::vector<uint8_t>>> expected;
  std::shared_ptr<const Program> program;
};

void load_convolution(ConvolutionModules& conv) {
  ETNA_REQUIRE_TESTDATA();
  conv.expected = serial_reference("djl_conv_xnnpack.pte", {kConvolution});
  conv.program = load_program("djl_conv_xnnpack.pte");
  ASSERT_TRUE(conv.program);
}

// Runs `steps` rounds of `call` through each module, `threads` threads at
// once, each thread taking its share of the modules in turn; every call must
// succeed and give `expected`.
void expect_modules_match_at_once(std::vector<std::unique_ptr<Module>>& modules, int threads, int steps,
                                  const CallShape& call, const std::vector<std::vector<uint8_t>>& expected) {
  std::atomic<int> mismatches{0}, failures{0};
  StartLine start(threads);
  run_threads(threads, [&](int thread) {
    start.arrive_and_wait();
    for (int step = 0; step < steps; ++step) {
      for (size_t m = static_cast<size_t>(thread); m < modules.size(); m += static_cast<size_t>(threads)) {
        const int round = (static_cast<int>(m) + step) % kRounds;
        auto out = run_call(*modules[m], call, round);
        if (!out) {
          ++failures;
          ADD_FAILURE() << out.error().message;
        } else if (*out != expected[static_cast<size_t>(round)]) {
          ++mismatches;
        }
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "outputs that differ from a lone module's";
}

// 64 sessions at numThreads 2, as a server would keep them: all of them
// compute on one process-wide pool (one worker thread on a machine with two
// cores or more, none on one core), and eight threads calling them at once
// get what a lone module gives.
TEST(SessionsConcurrency, SixtyFourModulesShareOneProcessPool) {
  ConvolutionModules conv;
  ASSERT_NO_FATAL_FAILURE(load_convolution(conv));
  const size_t threads_before = test::settled_process_threads();
  std::vector<std::unique_ptr<Module>> modules;
  for (int m = 0; m < 64; ++m) {
    modules.push_back(load_module(conv.program, ArenaSharing::kOn, 2));
    ASSERT_TRUE(modules.back());
    // The pool is taken when the delegate initialises (first call or, with sharing, at load).
    ASSERT_TRUE(run_call(*modules.back(), kConvolution, 0));
  }
  const size_t workers = std::min<size_t>(2, cores()) - 1;
  EXPECT_EQ(test::process_threads() - threads_before, workers);
  EXPECT_LE(test::process_threads() - threads_before, cores() + 1);
  EXPECT_EQ(ThreadPools::process().shared_pools(), workers);
  EXPECT_EQ(ThreadPools::process().shared_worker_threads(), workers);

  expect_modules_match_at_once(modules, kModules, 6, kConvolution, conv.expected[0]);
  modules.clear();
  EXPECT_EQ(ThreadPools::process().shared_pools(), 0u);
  // The worker is joined, and listed a moment longer.
  test::eventually([&] { return test::process_threads() == threads_before; });
  EXPECT_EQ(test::process_threads(), threads_before);
}

// Thread counts 1 to 4 shared, and pools of their own, all at once: each
// shared count has one pool (capped at the cores), each own pool is apart.
TEST(SessionsConcurrency, MixedThreadCountsAndOwnPoolsMatchALoneModule) {
  ConvolutionModules conv;
  ASSERT_NO_FATAL_FAILURE(load_convolution(conv));
  const size_t threads_before = test::settled_process_threads();
  std::vector<std::unique_ptr<Module>> modules;
  std::vector<size_t> shared_counts;
  size_t own_workers = 0;
  for (int m = 0; m < 16; ++m) {
    const int num_threads = 1 + m % 4;
    const bool own = m % 8 == 7;
    modules.push_back(load_module(conv.program, m % 2 ? ArenaSharing::kOn : ArenaSharing::kOff, num_threads,
                                  own ? ThreadPoolKind::kOwn : ThreadPoolKind::kShared));
    ASSERT_TRUE(modules.back());
    ASSERT_TRUE(run_call(*modules.back(), kConvolution, 0));
    const size_t capped = std::min<size_t>(static_cast<size_t>(num_threads), cores());
    if (own) {
      own_workers += static_cast<size_t>(num_threads) - 1;
    } else if (capped > 1 && std::find(shared_counts.begin(), shared_counts.end(), capped) == shared_counts.end()) {
      shared_counts.push_back(capped);
    }
  }
  size_t shared_workers = 0;
  for (size_t count : shared_counts) shared_workers += count - 1;
  EXPECT_EQ(ThreadPools::process().shared_pools(), shared_counts.size());
  EXPECT_EQ(ThreadPools::process().shared_worker_threads(), shared_workers);
  EXPECT_EQ(test::process_threads() - threads_before, shared_workers + own_workers);

  expect_modules_match_at_once(modules, kModules, 12, kConvolution, conv.expected[0]);
}

// One module keeps calling while others over the same pool come and go: the
// pool outlives every module but the last that holds it.
TEST(SessionsConcurrency, ModulesDisposedWhileAnotherUsesTheirPool) {
  ConvolutionModules conv;
  ASSERT_NO_FATAL_FAILURE(load_convolution(conv));
  auto steady = load_module(conv.program, ArenaSharing::kOn, 2);
  ASSERT_TRUE(steady);
  std::atomic<int> mismatches{0}, failures{0};
  std::atomic<bool> calling{true};
  std::thread caller([&] {
    for (int step = 0; calling.load() || step < kRounds; ++step) {
      auto out = run_call(*steady, kConvolution, step % kRounds);
      if (!out) {
        ++failures;
      } else if (*out != conv.expected[0][static_cast<size_t>(step % kRounds)]) {
        ++mismatches;
      }
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    // Loaded, called, and destroyed, possibly while `steady` is inside an operator on the pool.
    auto passing = load_module(conv.program, round % 2 ? ArenaSharing::kOn : ArenaSharing::kOff, 2);
    ASSERT_TRUE(passing);
    auto out = run_call(*passing, kConvolution, round);
    if (!out || *out != conv.expected[0][static_cast<size_t>(round)]) ++mismatches;
  }
  calling = false;
  caller.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(ThreadPools::process().shared_pools(), std::min<size_t>(2, cores()) - 1);
}

// A process may exit with modules alive, one of them in the middle of a call
// on the shared pool: exit neither hangs joining pool threads nor crashes.
TEST(SessionsConcurrencyDeathTest, ProcessExitsWithModulesAliveAndCalling) {
  ETNA_REQUIRE_TESTDATA();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto program = load_program("djl_conv_xnnpack.pte");
        std::vector<std::unique_ptr<Module>> modules;
        for (int m = 0; m < 4; ++m) {
          const ThreadPoolKind kind = m == 3 ? ThreadPoolKind::kOwn : ThreadPoolKind::kShared;
          modules.push_back(load_module(program, ArenaSharing::kOn, 2, kind));
        }
        std::atomic<int> calls{0};
        // A local, not kConvolution: exit() destroys statics but not the locals the thread reads.
        const CallShape call = kConvolution;
        std::thread([&] {
          for (int step = 0;; ++step) {
            if (run_call(*modules[static_cast<size_t>(step) % modules.size()], call, step % kRounds)) ++calls;
          }
        }).detach();
        while (calls.load() < 8) std::this_thread::yield();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace etna
