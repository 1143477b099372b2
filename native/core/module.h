// A Module: one Program plus all the mutable memory needed to run its
// methods, shared across methods or not (shareMemoryArenas).
//
// Not thread-safe by design: one call at a time per Module (a mutex guards
// against misuse; the TypeScript layer queues calls). Different Modules,
// even over one Program, run in parallel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend.h"
#include "data_map.h"
#include "io.h"
#include "memory.h"
#include "method.h"
#include "program.h"

namespace etna {

enum class ArenaSharing {
  kAuto,   // kOn when two or more methods plan a mem_id 2 arena, else kOff
  kOff,    // every method its own arenas (ExecuTorch's default)
  kOn,     // one mem_id 1 and one mem_id 2 arena for the whole module
  kState,  // only mem_id 2 shared
};

struct ModuleOptions {
  ArenaSharing sharing = ArenaSharing::kAuto;
  int num_threads = 1;
  std::shared_ptr<const DataMap> external_data;  // a .ptd file's tensors, when the program names some
};

struct ArenaReport {
  uint32_t memory_id = 0;
  uint64_t bytes = 0;
  bool shared = false;
  std::vector<std::string> methods;  // methods that use this buffer
};

struct MemoryReport {
  std::string mode;    // "shared", "state", "unshared"
  std::string reason;  // why this mode
  std::vector<ArenaReport> arenas;
  uint64_t planned_bytes = 0;            // arena bytes allocated now
  uint64_t unshared_planned_bytes = 0;   // what one set of arenas per method would need
  uint64_t constant_bytes = 0;           // mapped from the program, not copied
  uint64_t packed_weight_bytes = 0;      // delegates
  uint64_t workspace_bytes = 0;          // delegates
};

class Module {
 public:
  static Result<std::unique_ptr<Module>> load(std::shared_ptr<const Program> program, const ModuleOptions& options);
  ~Module();

  const Program& program() const { return *program_; }
  const std::vector<std::string>& method_names() const { return method_names_; }
  bool sharing_state() const { return sharing_ == ArenaSharing::kOn || sharing_ == ArenaSharing::kState; }

  // Loads a method now (with sharing every method is loaded by load()).
  Status load_method(const std::string& name);

  // Runs one method: validates and binds inputs, executes, copies each output
  // into the matching buffer (tensor outputs; capacity from output_capacity).
  Result<std::vector<OutputValue>> execute(const std::string& name, const std::vector<InputValue>& inputs,
                                           const std::vector<OutputBuffer>& outputs);
  // Bytes needed to receive each output of `name` (0 for non-tensors).
  Result<std::vector<size_t>> output_capacities(const std::string& name);

  MemoryReport memory_report() const;

 private:
  Module() = default;
  Status check_shared_plans() const;
  Result<MethodMemory> memory_for(size_t method_index);
  Result<Method*> method(const std::string& name);
  BackendModuleContext* backend_context(const Backend& backend);

  std::shared_ptr<const Program> program_;
  ModuleOptions options_;
  ArenaSharing sharing_ = ArenaSharing::kOff;
  std::string reason_;
  std::vector<std::string> method_names_;
  uint64_t constant_bytes_ = 0;  // summed over methods once at load; the program does not change
  std::shared_ptr<Arena> shared_activations_;  // mem_id 1 when sharing is kOn
  std::shared_ptr<Arena> shared_state_;        // mem_id 2 when sharing is kOn or kState
  std::map<std::string, std::unique_ptr<BackendModuleContext>> backend_contexts_;
  std::vector<std::unique_ptr<Method>> methods_;  // by method index; null until loaded
  std::vector<MethodMemory> method_memory_;       // by method index
  std::mutex call_mutex_;
};

ArenaSharing parse_sharing(const std::string& text, bool* ok);

}  // namespace etna
