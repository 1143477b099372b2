// A Module: one Program plus all the mutable memory needed to run its
// methods, shared across methods or not (shareMemoryArenas).
//
// One call at a time per Module: a call takes the module's call lease when it
// begins (on the caller's thread) and gives it back when it ends, possibly on
// another thread; a second call while one holds it is refused (the TypeScript
// layer queues calls, so that only happens on misuse). memory_report() may run
// on any thread at any time. Different Modules, even over one Program, run in
// parallel.
//
// Pooled activations: when a module shares mem_id 1 between its methods
// (kOn) and the loader puts nothing there (no initial value, no external
// data), mem_id 1 carries nothing from one call to the next: every tensor in
// it is written by the call that reads it, and outputs are copied out before
// the call ends. Such a module owns no activation arena; each call borrows one
// from its Program's pool (Program::activation_pool) when it begins and gives
// it back when it ends, so N idle sessions cost N states, not N arenas.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "data_map.h"
#include "io.h"
#include "memory.h"
#include "method.h"
#include "program.h"
#include "state_snapshot.h"

namespace etna {

enum class ArenaSharing {
  kAuto,   // kOn when two or more methods plan a mem_id 2 arena, else kOff
  kOff,    // every method its own arenas (ExecuTorch's default)
  kOn,     // one mem_id 1 and one mem_id 2 arena for the whole module
  kState,  // only mem_id 2 shared
};

struct ModuleOptions {
  ArenaSharing sharing = ArenaSharing::kAuto;
  int num_threads = 1;                                   // see BackendOptions
  ThreadPoolKind thread_pool = ThreadPoolKind::kShared;  // see BackendOptions
  std::shared_ptr<const DataMap> external_data;          // a .ptd file's tensors, when the program names some
};

// What Module::memory_report() returns. The addon (native/addon/convert.cpp)
// hands it to JavaScript field for field, snake_case here and camelCase there
// (a method's `method` is its `name`), as MemoryReport and ArenaReport of
// lib/memory.ts; that file documents what each field means, for users and for
// this code.
struct ArenaReport {
  uint32_t memory_id = 0;
  uint64_t bytes = 0;
  bool shared = false;
  bool pooled = false;
  std::vector<std::string> methods;
};

struct MethodConstantReport {
  std::string method;
  uint64_t constant_bytes = 0;
};

struct MemoryReport {
  std::string mode;  // "shared", "state" or "unshared"
  std::string reason;
  std::vector<ArenaReport> arenas;
  uint64_t planned_bytes = 0;
  uint64_t unshared_planned_bytes = 0;
  uint64_t constant_bytes = 0;
  uint64_t packed_weight_bytes = 0;
  uint64_t shared_packed_weight_bytes = 0;
  uint64_t workspace_bytes = 0;
  uint64_t pooled_arena_bytes = 0;
  uint64_t pooled_workspace_bytes = 0;
  uint64_t owned_bytes = 0;
  uint64_t shared_bytes = 0;
  // Of owned_bytes, the module's own arenas' bytes in pages no call has
  // touched yet: reserved, but costing no memory.
  uint64_t untouched_bytes = 0;
  std::vector<MethodConstantReport> methods;
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

  // One call of a method. The inputs are taken when the call begins: copied
  // into the method's memory when it is loaded, else into the call's own
  // copies (bound after the method loads, when the call runs). Holds the
  // module's call lease until destroyed; the Module must outlive it.
  class Call {
   public:
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    // Loads and binds if needed, runs, and copies the outputs out. Once.
    // With `profile`, the instruction loop is timed and its events are stored
    // there (see Method::execute).
    Result<std::vector<OutputValue>> run(std::vector<ProfileEvent>* profile = nullptr);

   private:
    friend class Module;
    Call(Module& module, size_t method_index, std::vector<OutputBuffer> outputs)
        : module_(module), method_index_(method_index), outputs_(std::move(outputs)) {}
    Module& module_;
    size_t method_index_;
    std::vector<OutputBuffer> outputs_;
    ArenaPool::Lease activations_;      // pooled activations: this call's mem_id 1
    bool bound_ = false;                // inputs already in the method's memory
    std::vector<InputValue> captured_;  // otherwise: the inputs, over captured_bytes_
    std::vector<std::vector<uint8_t>> captured_bytes_;
  };

  // Begins a call: takes the call lease (refused with kInternal while another
  // call holds it), checks inputs and output buffers against the method when
  // it is loaded (kInvalidInput; nothing changed) and takes the inputs.
  // Output buffers must stay valid until the call has run.
  Result<std::unique_ptr<Call>> begin_call(const std::string& name, const std::vector<InputValue>& inputs,
                                           std::vector<OutputBuffer> outputs);
  // The same for the method at `index` in method_names() (kMethodNotFound past the end).
  Result<std::unique_ptr<Call>> begin_call(size_t index, const std::vector<InputValue>& inputs,
                                           std::vector<OutputBuffer> outputs);
  // begin_call, then run on this thread.
  Result<std::vector<OutputValue>> execute(const std::string& name, const std::vector<InputValue>& inputs,
                                           const std::vector<OutputBuffer>& outputs);
  // Bytes needed to receive each output of `name` (0 for non-tensors).
  Result<std::vector<size_t>> output_capacities(const std::string& name);

  MemoryReport memory_report() const;

  // The module's state (mem_id 2: shared by its methods, or the one method's
  // that plans it) as a snapshot (state_snapshot.h). kInvalidInput when each
  // method keeps its own state (shareMemoryArenas: false over several
  // planners). A program with no state has an empty one.
  Result<const StateLayout*> state_layout() const;
  // The layout with `ranges` (checked against the arena) in place of the
  // planned ones: a partial snapshot's.
  Result<StateLayout> state_layout(const std::vector<ByteRange>& ranges) const;
  // Both take the call lease (kInternal while a call holds it). save_state
  // writes exactly layout.snapshot_bytes() bytes into `out`, `layout` being
  // state_layout() or a partial one; restore_state checks the snapshot whole
  // before it writes anything.
  Status save_state(const StateLayout& layout, uint8_t* out, size_t size);
  Status restore_state(const uint8_t* snapshot, size_t size);
  // Copies `ranges` of the state (checked against the arena) straight into
  // `target`'s, a module whose state is laid out as this one's (the same
  // program); no snapshot in between. Takes both call leases. kInvalidInput
  // for another layout or for `target` being this module.
  Status copy_state_to(Module& target, const std::vector<ByteRange>& ranges);
  // Faults in the pages under `ranges` of the state (checked against the
  // arena) and leaves the bytes as they are (populate_pages): the writes of
  // a later copy or restore into them then take no page fault. Takes the
  // call lease.
  Status populate_state(const std::vector<ByteRange>& ranges);

 private:
  // The call lease, held to read or write the state arena between calls.
  class StateLease {
   public:
    explicit StateLease(Module* module) : module_(module) {}
    StateLease(StateLease&& other) noexcept : arena_(other.arena_), module_(std::exchange(other.module_, nullptr)) {}
    StateLease& operator=(StateLease&&) = delete;
    ~StateLease();
    uint8_t* arena_ = nullptr;  // null when the state is empty

   private:
    Module* module_;
  };
  Result<StateLease> lease_state();

  Module() = default;
  Status check_shared_plans() const;
  Result<ArenaPool::Lease> borrow_activations() const;
  Result<MethodMemory> memory_for(size_t method_index);
  Result<size_t> method_index(const std::string& name) const;
  Status load_method(size_t index);
  BackendModuleContext* backend_context(const Backend& backend);

  std::shared_ptr<const Program> program_;
  ModuleOptions options_;
  ArenaSharing sharing_ = ArenaSharing::kOff;
  std::string reason_;
  std::vector<std::string> method_names_;
  uint64_t constant_bytes_ = 0;  // computed once at load; the program does not change
  std::vector<uint64_t> method_constant_bytes_;
  std::shared_ptr<Arena> shared_activations_;  // mem_id 1 when sharing is kOn (while loading, when pooled)
  bool pooled_activations_ = false;            // mem_id 1 borrowed per call (see above)
  uint64_t activation_bytes_ = 0;              // mem_id 1 size when sharing is kOn
  std::shared_ptr<Arena> shared_state_;        // mem_id 2 when sharing is kOn or kState
  std::optional<StateLayout> state_layout_;    // unset when each method keeps its own state
  std::optional<size_t> state_method_;         // the one method whose mem_id 2 is the state, when unshared
  std::string state_refusal_;                  // why there is no state layout
  // What calls compute on when num_threads > 1: handed to the portable
  // kernels and to the backends (BackendOptions::pool).
  std::shared_ptr<ThreadPool> thread_pool_;
  std::vector<std::unique_ptr<Method>> methods_;  // by method index; null until loaded; touched under the call lease
  std::atomic<bool> call_running_{false};         // the call lease
  // Written while a call loads a method, read by memory_report() on any thread.
  mutable std::mutex report_mutex_;
  std::map<std::string, std::unique_ptr<BackendModuleContext>> backend_contexts_;
  std::vector<MethodMemory> method_memory_;  // by method index
};

// The words of the API's shareMemoryArenas option, as lib/memory.ts sends
// them: "true", "false", "state", "auto".
ArenaSharing parse_sharing(const std::string& text, bool* ok);

}  // namespace etna
