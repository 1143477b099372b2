// Fuzz target: arbitrary bytes as a .pte program. Loads it, then (when it
// verifies) loads a Module with arena sharing on and off, loads every method
// and runs each once with zero-filled inputs shaped by its metadata. Any
// outcome is fine except a crash, a sanitizer report or a leak.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/module.h"
#include "core/program.h"
#include "core/program_info.h"
#include "fuzz_common.h"
#include "kernels/registry.h"

namespace {

// Programs whose planned arenas add up to more than this are loaded and
// described but not given memory: the allocation itself is legitimate and
// would only trip the fuzzer's malloc limit.
constexpr uint64_t kMaxPlannedBytes = uint64_t{1} << 26;

bool small_enough(const etna::ProgramInfo& info) {
  uint64_t total = 0;
  for (const auto& method : info.methods) {
    for (int64_t size : method.memory_plan) {
      if (size < 0) continue;
      total += static_cast<uint64_t>(size);
      if (total > kMaxPlannedBytes) return false;
    }
  }
  return true;
}

void run_methods(etna::Module& module, const etna::ProgramInfo& info) {
  for (const auto& method : info.methods) {
    if (!module.load_method(method.name)) continue;
    auto capacities = module.output_capacities(method.name);
    if (!capacities) continue;
    uint64_t total = 0;
    for (size_t capacity : *capacities) total += capacity;
    if (total > etna::fuzz::kMaxInputBytes * 4) continue;
    std::vector<std::vector<uint8_t>> output_storage;
    std::vector<etna::OutputBuffer> outputs;
    output_storage.reserve(capacities->size());
    for (size_t capacity : *capacities) {
      output_storage.emplace_back(capacity);
      outputs.push_back(etna::OutputBuffer{output_storage.back().data(), capacity});
    }
    etna::fuzz::ZeroInputs inputs = etna::fuzz::zero_inputs(method);
    if (!inputs.usable) continue;
    auto result = module.execute(method.name, inputs.values, outputs);
    (void)result;  // a typed error is as good as a result here
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  etna::kernels::register_portable_kernels();
  etna::backends::register_xnnpack_backend();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto program = etna::Program::load_bytes(data, size);
  if (!program) return 0;
  const etna::ProgramInfo info = etna::describe_program(**program);
  if (!small_enough(info)) return 0;
  for (etna::ArenaSharing sharing : {etna::ArenaSharing::kOn, etna::ArenaSharing::kOff}) {
    etna::ModuleOptions options;
    options.sharing = sharing;
    auto module = etna::Module::load(*program, options);
    if (!module) continue;
    run_methods(**module, info);
    (void)(*module)->memory_report();
  }
  return 0;
}
