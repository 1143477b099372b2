// The executor on the real programs: results from their README, sharing
// semantics, and load-time errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/module.h"
#include "core/program.h"
#include "backends/xnnpack/generated/xnnpack_generated.h"
#include "test_support.h"

namespace etna {
namespace {

using test::float_tensor;
using test::load_program;
using test::long_tensor;
using test::testdata;

// Runs one method and returns each tensor output's bytes.
struct Outputs {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<OutputValue> values;

  std::vector<float> floats(size_t i) const {
    std::vector<float> out(values[i].nbytes / sizeof(float));
    std::memcpy(out.data(), bytes[i].data(), values[i].nbytes);
    return out;
  }
  std::vector<int64_t> longs(size_t i) const {
    std::vector<int64_t> out(values[i].nbytes / sizeof(int64_t));
    std::memcpy(out.data(), bytes[i].data(), values[i].nbytes);
    return out;
  }
};

Result<Outputs> run(Module& module, const std::string& method, const std::vector<InputValue>& inputs) {
  auto capacities = module.output_capacities(method);
  if (!capacities) return capacities.error();
  Outputs out;
  std::vector<OutputBuffer> buffers;
  for (size_t capacity : *capacities) out.bytes.emplace_back(capacity);
  for (auto& bytes : out.bytes) buffers.push_back(OutputBuffer{bytes.data(), bytes.size()});
  auto values = module.execute(method, inputs, buffers);
  if (!values) return values.error();
  out.values = std::move(*values);
  return out;
}

std::unique_ptr<Module> load_over(const std::shared_ptr<const Program>& program, ArenaSharing sharing) {
  ModuleOptions options;
  options.sharing = sharing;
  auto module = Module::load(program, options);
  EXPECT_TRUE(module) << (module ? "" : module.error().message);
  return module ? std::move(*module) : nullptr;
}

std::unique_ptr<Module> load_module(const std::string& name, ArenaSharing sharing = ArenaSharing::kAuto) {
  auto program = load_program(name);
  return program ? load_over(program, sharing) : nullptr;
}

TEST(Module, AddsTwoTensors) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_add.pte");
  ASSERT_TRUE(module);
  std::vector<float> a{1.5f}, b{2.25f};
  auto out = run(*module, "forward", {float_tensor({1}, a), float_tensor({1}, b)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->floats(0), std::vector<float>{3.75f});
}

TEST(Module, LinearFromDeprecatedConstantBuffer) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_ModuleLinear-no-constant-segment.pte");
  ASSERT_TRUE(module);
  std::vector<float> x{1, -2, 0.5f, 4};
  auto out = run(*module, "forward", {float_tensor({2, 2}, x)});
  ASSERT_TRUE(out) << out.error().message;
  const auto y = out->floats(0);
  ASSERT_EQ(y.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], 3 * x[i] + 2);
}

TEST(Module, ArduinoAddsSegmentConstant) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_arduino_add_model.pte");
  ASSERT_TRUE(module);
  std::vector<float> x{1, 2, -3};
  auto out = run(*module, "forward", {float_tensor({3}, x)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->floats(0), (std::vector<float>{2, 3, -2}));
}

TEST(Module, MeanThenWhere) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_model_constant_buffer.pte");
  ASSERT_TRUE(module);
  std::vector<float> x{1, 3};
  auto out = run(*module, "forward", {float_tensor({1, 2}, x)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FLOAT_EQ(out->floats(0)[0], 2.0f);
  std::vector<float> zero{-1, 1};
  out = run(*module, "forward", {float_tensor({1, 2}, zero)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_FLOAT_EQ(out->floats(0)[0], 1.1f);
}

TEST(Module, SoftmaxRowsSumToOne) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_softmax_pr17248.pte");
  ASSERT_TRUE(module);
  std::vector<float> x(2 * 4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.37f) * 5;
  auto out = run(*module, "forward", {float_tensor({2, 4096}, x)});
  ASSERT_TRUE(out) << out.error().message;
  const auto y = out->floats(0);
  for (int row = 0; row < 2; ++row) {
    double max = -1e30, sum = 0, total = 0;
    for (int j = 0; j < 4096; ++j) max = std::max<double>(max, x[row * 4096 + j]);
    for (int j = 0; j < 4096; ++j) sum += std::exp(x[row * 4096 + j] - max);
    for (int j = 0; j < 4096; ++j) {
      const double expected = std::exp(x[row * 4096 + j] - max) / sum;
      EXPECT_NEAR(y[row * 4096 + j], expected, 1e-6);
      total += y[row * 4096 + j];
    }
    EXPECT_NEAR(total, 1.0, 1e-4);
  }
}

TEST(Module, MixedDtypes) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("npr_dtypes.pte");
  ASSERT_TRUE(module);
  std::vector<int64_t> a{21};
  std::vector<float> b{1.25f};
  auto out = run(*module, "forward", {long_tensor({1}, a), float_tensor({1}, b)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->values[0].dtype, ScalarType::kLong);
  EXPECT_EQ(out->longs(0), std::vector<int64_t>{42});
  EXPECT_EQ(out->floats(1), std::vector<float>{2.5f});
}

TEST(Module, BothMethodsOfAMultiMethodProgram) {
  ETNA_REQUIRE_TESTDATA();
  for (ArenaSharing sharing : {ArenaSharing::kOff, ArenaSharing::kOn}) {
    auto module = load_module("npr_multi_method.pte", sharing);
    ASSERT_TRUE(module);
    std::vector<float> x{1, -4};
    for (const char* method : {"double", "forward", "double"}) {
      auto out = run(*module, method, {float_tensor({2}, x)});
      ASSERT_TRUE(out) << out.error().message;
      EXPECT_EQ(out->floats(0), (std::vector<float>{2, -3})) << method;
    }
  }
}

TEST(Module, MultiplyOfNodeExecutorchFixture) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("nodeet_mul.pte");
  ASSERT_TRUE(module);
  std::vector<float> a{1, 2, 3, 4, 5, 6}, b{2, 2, 2, -1, 0.5f, 0};
  auto out = run(*module, "forward", {float_tensor({3, 2}, a), float_tensor({3, 2}, b)});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->floats(0), (std::vector<float>{2, 4, 6, -4, 2.5f, 0}));
}

TEST(Module, BadInputsAreRefusedWithReasons) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_add.pte");
  ASSERT_TRUE(module);
  std::vector<float> one{1};
  std::vector<float> two{1, 2};
  std::vector<int64_t> wrong{1};
  auto count = run(*module, "forward", {float_tensor({1}, one)});
  ASSERT_FALSE(count);
  EXPECT_EQ(count.error().code, ErrorCode::kInvalidInput);
  EXPECT_NE(count.error().message.find("takes 2 inputs, got 1"), std::string::npos) << count.error().message;
  auto dtype = run(*module, "forward", {float_tensor({1}, one), long_tensor({1}, wrong)});
  ASSERT_FALSE(dtype);
  EXPECT_NE(dtype.error().message.find("input 1: expected float32[1], got int64[1]"), std::string::npos)
      << dtype.error().message;
  auto shape = run(*module, "forward", {float_tensor({2}, two), float_tensor({1}, one)});
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message.find("input 0: expected float32[1], got float32[2] (shape differs)"),
            std::string::npos)
      << shape.error().message;
  auto missing = run(*module, "backward", {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kMethodNotFound);
}

// Loads `bytes` as a program, a module of it and its "forward" method: the
// first failure, if any.
Status load_forward(const std::vector<uint8_t>& bytes) {
  auto program = Program::load_bytes(bytes.data(), bytes.size());
  if (!program) return program.error();
  auto module = Module::load(*program, ModuleOptions{});
  if (!module) return module.error();
  return (*module)->load_method("forward");
}

TEST(Module, MissingOperatorsAreListedAtLoad) {
  ETNA_REQUIRE_TESTDATA();
  auto bytes = test::read_file(testdata("et_ModuleLinear-no-constant-segment.pte"));
  ASSERT_TRUE(test::patch_bytes(bytes, "aten::mul", "aten::zzz"));
  ASSERT_TRUE(test::patch_bytes(bytes, "aten::add", "aten::yyy"));
  Status status = load_forward(bytes);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kUnsupportedOperator);
  EXPECT_NE(status.error().message.find("aten::zzz.out, aten::yyy.out"), std::string::npos) << status.error().message;
}

TEST(Module, UnknownBackendIsNamed) {
  ETNA_REQUIRE_TESTDATA();
  auto bytes = test::read_file(testdata("npr_add_xnnpack.pte"));
  ASSERT_TRUE(test::patch_bytes(bytes, "XnnpackBackend", "QnnBackendXXXX"));
  Status status = load_forward(bytes);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kUnsupportedBackend);
  EXPECT_NE(status.error().message.find("'QnnBackendXXXX'"), std::string::npos) << status.error().message;
}

// Sets the num_externs field of the first delegate's XNNPACK graph in the
// program's bytes (the field a corrupted payload gets wrong).
bool set_num_externs(std::vector<uint8_t>& bytes, uint32_t num_externs) {
  auto program = Program::load_bytes(bytes.data(), bytes.size());
  if (!program) return false;
  const ByteSpan payload = (*program)->delegate_payload(*(*program)->method(0).delegates()->Get(0));
  if (payload.size < 64) return false;
  // The payload inside the file: its first 64 bytes are unique there.
  auto at = std::search(bytes.begin(), bytes.end(), payload.data, payload.data + 64);
  if (at == bytes.end()) return false;
  uint8_t* base = &*at;
  auto read32 = [](const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  // An "XH00" header (at byte 4) gives the flatbuffer's offset at byte 10.
  uint8_t* flatbuffer = std::memcmp(base + 4, "XH00", 4) == 0 ? base + read32(base + 10) : base;
  uint8_t* table = flatbuffer + read32(flatbuffer);
  const uint8_t* vtable = table - static_cast<int32_t>(read32(table));
  uint16_t field = 0;
  std::memcpy(&field, vtable + etna::xnnpack::Graph::VT_NUM_EXTERNS, 2);
  if (field == 0) return false;
  std::memcpy(table + field, &num_externs, 4);
  return true;
}

TEST(Module, DelegatePayloadDisagreeingWithItsCallIsRefusedAtLoad) {
  ETNA_REQUIRE_TESTDATA();
  auto bytes = test::read_file(testdata("npr_add_xnnpack.pte"));
  ASSERT_TRUE(set_num_externs(bytes, 296));
  Status status = load_forward(bytes);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(status.error().message.find("its payload declares 296 inputs and outputs"), std::string::npos)
      << status.error().message;
}

TEST(Module, MemoryReportSaysWhy) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("npr_multi_method.pte", ArenaSharing::kAuto);
  ASSERT_TRUE(module);
  ASSERT_TRUE(module->load_method("double"));
  ASSERT_TRUE(module->load_method("forward"));
  MemoryReport report = module->memory_report();
  EXPECT_EQ(report.mode, "unshared");
  EXPECT_NE(report.reason.find("no method plans a mem_id 2"), std::string::npos);
  EXPECT_EQ(report.planned_bytes, 96u);
  EXPECT_EQ(report.unshared_planned_bytes, 96u);
  auto shared = load_module("npr_multi_method.pte", ArenaSharing::kOn);
  ASSERT_TRUE(shared);
  MemoryReport shared_report = shared->memory_report();
  EXPECT_EQ(shared_report.mode, "shared");
  EXPECT_EQ(shared_report.planned_bytes, 48u);
  ASSERT_EQ(shared_report.arenas.size(), 1u);
  EXPECT_EQ(shared_report.arenas[0].methods, (std::vector<std::string>{"double", "forward"}));
}

TEST(Module, ConstantsReadByTwoMethodsAreCountedOnce) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("npr_multi_method.pte");
  ASSERT_TRUE(module);
  MemoryReport report = module->memory_report();
  EXPECT_EQ(report.constant_bytes, 8u);  // one float32[2] constant, read by both methods
  ASSERT_EQ(report.methods.size(), 2u);
  EXPECT_EQ(report.methods[0].method, "double");
  EXPECT_EQ(report.methods[0].constant_bytes, 8u);
  EXPECT_EQ(report.methods[1].constant_bytes, 8u);
}

// Begins a call with buffers for every output of `name`; `bytes` keeps them.
Result<std::unique_ptr<Module::Call>> begin(Module& module, const std::string& name,
                                            const std::vector<InputValue>& inputs,
                                            std::vector<std::vector<uint8_t>>& bytes) {
  auto capacities = module.output_capacities(name);
  if (!capacities) return capacities.error();
  std::vector<OutputBuffer> buffers;
  for (size_t capacity : *capacities) bytes.emplace_back(capacity);
  for (auto& b : bytes) buffers.push_back(OutputBuffer{b.data(), b.size()});
  return module.begin_call(name, inputs, buffers);
}

float first_float(const std::vector<uint8_t>& bytes) {
  float value = 0;
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

TEST(Module, OneCallHoldsTheLeaseUntilItIsDropped) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("et_add.pte");
  ASSERT_TRUE(module);
  std::vector<float> a{1}, b{2};
  std::vector<std::vector<uint8_t>> out1, out2, out3;
  auto call = begin(*module, "forward", {float_tensor({1}, a), float_tensor({1}, b)}, out1);
  ASSERT_TRUE(call) << call.error().message;
  auto second = begin(*module, "forward", {float_tensor({1}, a), float_tensor({1}, b)}, out2);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kInternal);
  ASSERT_TRUE((*call)->run());
  call->reset();
  auto third = begin(*module, "forward", {float_tensor({1}, a), float_tensor({1}, b)}, out3);
  ASSERT_TRUE(third) << third.error().message;
  // A refused call gives the lease back too.
  third->reset();
  std::vector<float> wrong{1, 2};
  std::vector<std::vector<uint8_t>> out4;
  ASSERT_FALSE(begin(*module, "forward", {float_tensor({2}, wrong), float_tensor({1}, b)}, out4));
  EXPECT_TRUE(run(*module, "forward", {float_tensor({1}, a), float_tensor({1}, b)}));
}

TEST(Module, CallsNameTheirMethodByItsPlaceInMethodNames) {
  ETNA_REQUIRE_TESTDATA();
  auto module = load_module("npr_multi_method.pte");
  ASSERT_TRUE(module);
  const auto& names = module->method_names();
  std::vector<float> x{1, -4};
  for (size_t index = 0; index < names.size(); ++index) {
    std::vector<uint8_t> by_index(2 * sizeof(float)), by_name(2 * sizeof(float));
    auto call = module->begin_call(index, {float_tensor({2}, x)}, {OutputBuffer{by_index.data(), by_index.size()}});
    ASSERT_TRUE(call) << call.error().message;
    ASSERT_TRUE((*call)->run());
    call->reset();
    auto named =
        module->begin_call(names[index], {float_tensor({2}, x)}, {OutputBuffer{by_name.data(), by_name.size()}});
    ASSERT_TRUE(named) << named.error().message;
    ASSERT_TRUE((*named)->run());
    EXPECT_EQ(by_index, by_name) << names[index];
  }
  std::vector<uint8_t> out(2 * sizeof(float));
  auto past = module->begin_call(names.size(), {float_tensor({2}, x)}, {OutputBuffer{out.data(), out.size()}});
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, ErrorCode::kMethodNotFound);
  EXPECT_NE(past.error().message.find("no method at index 2 (this program has 2 methods)"), std::string::npos)
      << past.error().message;
  // The refusal took no lease: the next call runs.
  EXPECT_TRUE(run(*module, "forward", {float_tensor({2}, x)}));
}

TEST(Module, InputsAreTakenWhenTheCallBegins) {
  ETNA_REQUIRE_TESTDATA();
  // Loaded method (bound at once) and a method that loads when the call runs (copied).
  for (ArenaSharing sharing : {ArenaSharing::kOn, ArenaSharing::kOff}) {
    auto module = load_module("npr_multi_method.pte", sharing);
    ASSERT_TRUE(module);
    const bool loaded = !module->memory_report().arenas.empty();
    EXPECT_EQ(loaded, sharing == ArenaSharing::kOn);
    std::vector<float> x{1, 2};
    std::vector<uint8_t> out(2 * sizeof(float));
    auto call = module->begin_call("forward", {float_tensor({2}, x)}, {OutputBuffer{out.data(), out.size()}});
    ASSERT_TRUE(call) << call.error().message;
    x = {50, 60};
    auto values = (*call)->run();
    ASSERT_TRUE(values) << values.error().message;
    EXPECT_EQ(first_float(out), 2.0f);
  }
  auto unplanned = load_module("djl_add_unplanned_xnnpack.pte");
  ASSERT_TRUE(unplanned);
  std::vector<float> a{1.5f}, b{2};
  std::vector<std::vector<uint8_t>> out;
  auto call = begin(*unplanned, "forward", {float_tensor({1}, a), float_tensor({1}, b)}, out);
  ASSERT_TRUE(call) << call.error().message;
  a[0] = -40;
  ASSERT_TRUE((*call)->run());
  EXPECT_EQ(first_float(out[0]), 3.5f);
}

TEST(Module, TooSmallOutputBufferIsRefusedBeforeAnythingRuns) {
  ETNA_REQUIRE_TESTDATA();
  for (ArenaSharing sharing : {ArenaSharing::kOn, ArenaSharing::kOff}) {
    auto module = load_module("npr_multi_method.pte", sharing);
    ASSERT_TRUE(module);
    std::vector<float> x{1, 2};
    float small = 0;
    auto refused = module->execute("forward", {float_tensor({2}, x)}, {OutputBuffer{&small, sizeof small}});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidInput);
    EXPECT_NE(refused.error().message.find("needs 8 bytes"), std::string::npos) << refused.error().message;
    EXPECT_EQ(small, 0.0f);
    auto missing = module->execute("forward", {float_tensor({2}, x)}, {});
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::kInvalidInput);
  }
}

TEST(Module, SharingWordsAreTheApiOnes) {
  const std::pair<const char*, ArenaSharing> words[] = {{"true", ArenaSharing::kOn},
                                                        {"false", ArenaSharing::kOff},
                                                        {"state", ArenaSharing::kState},
                                                        {"auto", ArenaSharing::kAuto}};
  for (const auto& [word, mode] : words) {
    bool ok = false;
    EXPECT_EQ(parse_sharing(word, &ok), mode) << word;
    EXPECT_TRUE(ok) << word;
  }
  for (const char* other : {"on", "off", "shared", "unshared", ""}) {
    bool ok = true;
    parse_sharing(other, &ok);
    EXPECT_FALSE(ok) << other;
  }
}

// Sessions: modules over one program that borrow their activation arena
// (mem_id 1) and delegate workspaces per call from the program's pools.

std::vector<float> conv_input(uint32_t seed) {
  std::vector<float> x(3 * 16 * 16);
  uint32_t state = seed * 2654435761u + 1;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  return x;
}

Result<std::vector<uint8_t>> conv_output(Module& module, uint32_t seed) {
  const auto x = conv_input(seed);
  auto out = run(module, "forward", {float_tensor({1, 3, 16, 16}, x)});
  if (!out) return out.error();
  return out->bytes[0];
}

size_t pooled_arenas(const Program& program) {
  size_t count = 0;
  program.activation_pool().for_each([&](const Arena&) { ++count; });
  return count;
}

// The convolution program and a module over it whose calls borrow pooled arenas.
void load_pooled_conv(std::shared_ptr<const Program>& program, std::unique_ptr<Module>& module) {
  ETNA_REQUIRE_TESTDATA();
  program = load_program("djl_conv_xnnpack.pte");
  ASSERT_TRUE(program);
  module = load_over(program, ArenaSharing::kOn);
  ASSERT_TRUE(module);
}

TEST(SessionsConcurrency, ThreadsCallingModulesOfOneProgramGetTheOutputsOfLoneModules) {
  ETNA_REQUIRE_TESTDATA();
  constexpr uint32_t kThreads = 4, kRounds = 25;
  // What each thread's inputs give on a module alone over its own program.
  std::vector<std::vector<std::vector<uint8_t>>> expected(kThreads);
  for (uint32_t t = 0; t < kThreads; ++t) {
    auto alone = load_module("djl_conv_xnnpack.pte", ArenaSharing::kOn);
    ASSERT_TRUE(alone);
    for (uint32_t r = 0; r < kRounds; ++r) {
      auto out = conv_output(*alone, t * 1000 + r);
      ASSERT_TRUE(out) << out.error().message;
      expected[t].push_back(std::move(*out));
    }
  }
  auto program = load_program("djl_conv_xnnpack.pte");
  ASSERT_TRUE(program);
  std::vector<std::unique_ptr<Module>> modules;
  for (uint32_t t = 0; t < kThreads; ++t) modules.push_back(load_over(program, ArenaSharing::kOn));
  for (const auto& module : modules) ASSERT_TRUE(module);
  std::vector<std::vector<std::vector<uint8_t>>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t r = 0; r < kRounds; ++r) {
        auto out = conv_output(*modules[t], t * 1000 + r);
        if (!out) {
          errors[t] = out.error().message;
          return;
        }
        got[t].push_back(std::move(*out));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (uint32_t t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_EQ(got[t], expected[t]) << "thread " << t;
  }
  // Every arena went back; the pool made at most one per call in flight.
  EXPECT_EQ(program->activation_pool().lent(), 0u);
  EXPECT_GE(pooled_arenas(*program), 1u);
  EXPECT_LE(pooled_arenas(*program), size_t{kThreads});
}

TEST(SessionsConcurrency, PooledModulesOwnNoActivationArena) {
  std::shared_ptr<const Program> program;
  std::unique_ptr<Module> pooled;
  ASSERT_NO_FATAL_FAILURE(load_pooled_conv(program, pooled));
  MemoryReport report = pooled->memory_report();
  ASSERT_EQ(report.arenas.size(), 1u);
  EXPECT_TRUE(report.arenas[0].pooled);
  EXPECT_EQ(report.pooled_arena_bytes, report.arenas[0].bytes);
  EXPECT_GT(report.pooled_workspace_bytes, 0u);
  EXPECT_EQ(report.owned_bytes, report.packed_weight_bytes);  // alone: no state, the weights are its only own bytes
  EXPECT_EQ(report.shared_bytes, report.pooled_arena_bytes + report.pooled_workspace_bytes);
  // Unshared modules keep their arenas and workspaces: nothing pooled.
  auto own = load_over(program, ArenaSharing::kOff);
  ASSERT_TRUE(own);
  ASSERT_TRUE(conv_output(*own, 1));
  MemoryReport own_report = own->memory_report();
  ASSERT_EQ(own_report.arenas.size(), 1u);
  EXPECT_FALSE(own_report.arenas[0].pooled);
  EXPECT_EQ(own_report.pooled_arena_bytes, 0u);
  EXPECT_EQ(own_report.pooled_workspace_bytes, 0u);
  EXPECT_GT(own_report.workspace_bytes, 0u);
  // The pooled module's calls borrow one arena, not one per module.
  auto second = load_over(program, ArenaSharing::kOn);
  ASSERT_TRUE(second);
  ASSERT_TRUE(conv_output(*pooled, 2));
  ASSERT_TRUE(conv_output(*second, 3));
  EXPECT_EQ(pooled_arenas(*program), 1u);
}

TEST(SessionsConcurrency, StateLoadedIntoMemId1KeepsTheModulesOwnArena) {
  ETNA_REQUIRE_TESTDATA();
  // Training programs keep their weights, initialised from the .ptd, in mem_id 1.
  auto program = load_program("et_xor_training.pte");
  ASSERT_TRUE(program);
  auto data = DataMap::load_file(testdata("et_xor_training.ptd"));
  ASSERT_TRUE(data) << data.error().message;
  ModuleOptions options;
  options.sharing = ArenaSharing::kOn;
  options.external_data = *data;
  auto module = Module::load(program, options);
  ASSERT_TRUE(module) << module.error().message;
  MemoryReport report = (*module)->memory_report();
  ASSERT_FALSE(report.arenas.empty());
  EXPECT_EQ(report.arenas[0].memory_id, 1u);
  EXPECT_FALSE(report.arenas[0].pooled);
  EXPECT_EQ(report.pooled_arena_bytes, 0u);
  EXPECT_NE(report.reason.find("owns its mem_id 1 arena"), std::string::npos) << report.reason;
  EXPECT_EQ(pooled_arenas(*program), 0u);
}

TEST(SessionsConcurrency, RefusedAndDroppedCallsGiveTheirArenaBack) {
  std::shared_ptr<const Program> program;
  std::unique_ptr<Module> module;
  ASSERT_NO_FATAL_FAILURE(load_pooled_conv(program, module));
  const auto x = conv_input(5);
  std::vector<float> wrong(10);
  std::vector<uint8_t> out(1 * 8 * 16 * 16 * sizeof(float));
  auto refused = module->begin_call("forward", {float_tensor({10}, wrong)}, {OutputBuffer{out.data(), out.size()}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(program->activation_pool().lent(), 0u);
  {
    auto begun =
        module->begin_call("forward", {float_tensor({1, 3, 16, 16}, x)}, {OutputBuffer{out.data(), out.size()}});
    ASSERT_TRUE(begun) << begun.error().message;
    EXPECT_EQ(program->activation_pool().lent(), 1u);
  }  // dropped without running
  EXPECT_EQ(program->activation_pool().lent(), 0u);
  // Another module may take the arena the dropped call gave back.
  auto other = load_over(program, ArenaSharing::kOn);
  ASSERT_TRUE(other);
  auto expected = conv_output(*module, 5);
  auto got = conv_output(*other, 5);
  ASSERT_TRUE(expected && got);
  EXPECT_EQ(*got, *expected);
  EXPECT_EQ(pooled_arenas(*program), 1u);
}

TEST(SessionsConcurrency, ACallFailingWhileItRunsGivesItsArenaBack) {
  ETNA_REQUIRE_TESTDATA();
  // A mapped program whose file changes after the call began fails in run().
  test::ScratchFile file(testdata("djl_conv_xnnpack.pte"));
  auto program = Program::load_file(file.path(), FileAccess::kMap);
  ASSERT_TRUE(program) << program.error().message;
  auto module = load_over(*program, ArenaSharing::kOn);
  ASSERT_TRUE(module);
  const auto x = conv_input(6);
  std::vector<uint8_t> out(1 * 8 * 16 * 16 * sizeof(float));
  auto call = module->begin_call("forward", {float_tensor({1, 3, 16, 16}, x)}, {OutputBuffer{out.data(), out.size()}});
  ASSERT_TRUE(call) << call.error().message;
  EXPECT_EQ((*program)->activation_pool().lent(), 1u);
  file.truncate(0);
  auto failed = (*call)->run();
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kInvalidProgram);
  call->reset();
  EXPECT_EQ((*program)->activation_pool().lent(), 0u);
  EXPECT_EQ(pooled_arenas(**program), 1u);
}

}  // namespace
}  // namespace etna
