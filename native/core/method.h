// One loaded method: its values bound to memory, kernels resolved, delegates
// initialised, and the instruction loop.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "data_map.h"
#include "evalue.h"
#include "io.h"
#include "kernel.h"
#include "memory.h"
#include "profile.h"
#include "program.h"
#include "status.h"

namespace etna {

// Gives a method the module-wide context of a backend (created once per Module).
using BackendContextProvider = std::function<BackendModuleContext*(const Backend&)>;

class Method {
 public:
  // `memory.arenas` must cover every planned arena of the method (index
  // mem_id - 1), each at least as large as the method's plan says.
  // `external_data` (may be null) supplies tensors the program stores outside itself.
  static Result<std::unique_ptr<Method>> load(std::shared_ptr<const Program> program, size_t method_index,
                                              MethodMemory memory, const BackendContextProvider& backends,
                                              std::shared_ptr<const DataMap> external_data = nullptr);
  ~Method();
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const std::string& name() const { return name_; }
  size_t input_count() const { return input_indices_.size(); }
  size_t output_count() const { return output_indices_.size(); }

  // Checks every input against the method's metadata without touching memory.
  Status validate_inputs(const std::vector<InputValue>& inputs) const;
  // validate_inputs, then copies them into the method's memory; the caller's
  // arrays are not read after this returns.
  Status set_inputs(const std::vector<InputValue>& inputs);
  // Checks there is one buffer per output and that each tensor output's buffer
  // holds the output at its upper bound (output_capacity).
  Status validate_outputs(const std::vector<OutputBuffer>& outputs) const;
  // Runs the instructions. With a `profile` recorder, records one kCall event
  // around the loop, one event per instruction inside it and the delegates'
  // stages inside theirs; without one, nothing is timed. Kernels may split
  // their work over `pool` (null: the calling thread alone).
  Status execute(ProfileRecorder* profile = nullptr, pthreadpool_t pool = nullptr);
  // Events to make room for in a recorder before a profiled call: the call,
  // one per step, and room for the stages of delegates.
  size_t profile_capacity() const { return 1 + 4 * steps_.size(); }
  // Copies output i into `buffer` (tensors; checked by validate_outputs) and describes it.
  Result<OutputValue> read_output(size_t index, const OutputBuffer& buffer) const;
  // Bytes an output tensor occupies at its upper bound (0 for non-tensors).
  size_t output_capacity(size_t index) const;
  // Moves every tensor planned in `memory_id` onto `arena` (same plan, at
  // least as large; checked by the caller): for modules that borrow their
  // activation arena for one call. Free when `arena` is the current one.
  void use_arena(uint32_t memory_id, const std::shared_ptr<Arena>& arena);

 private:
  struct Step {
    fb::InstructionArguments kind;
    uint32_t arg_begin = 0;  // into arg_storage_
    uint32_t arg_count = 0;
    const KernelDescriptor* kernel = nullptr;
    std::string label;  // operator key, delegate id or instruction kind, for messages and profiles
    DelegateHandle* delegate = nullptr;
    int32_t value_index = 0;  // the value a MoveCall copies, a JumpFalseCall tests, a FreeCall frees
    int32_t destination = 0;  // the value a MoveCall copies to / the instruction a JumpFalseCall jumps to
  };

  Method() = default;
  Status bind_values(MethodMemory& memory);
  Status bind_tensor(size_t value_index, const fb::Tensor& tensor, MethodMemory& memory);
  Status bind_external(const std::string& at, const fb::Tensor& tensor, uint64_t nbytes, Tensor& t,
                       MethodMemory& memory);
  void place(Tensor& tensor, const fb::AllocationDetails& allocation, size_t nbytes, MethodMemory& memory);
  Status prepare_steps(const BackendContextProvider& backends);
  Status validate_input(size_t i, const InputValue& input) const;
  template <bool kProfiled>
  Status run_steps(ProfileRecorder* profile, pthreadpool_t pool);
  // Runs steps_[index]; sets `pc` to the chain position that runs next.
  Status run_step(size_t index, uint32_t& pc, ProfileRecorder* profile, pthreadpool_t pool);
  std::string where(size_t step) const;

  std::shared_ptr<const Program> program_;
  std::shared_ptr<const DataMap> external_data_;
  const fb::ExecutionPlan* plan_ = nullptr;
  std::string name_;
  MethodMemory memory_;

  std::vector<EValue> values_;
  std::vector<Tensor> tensors_;
  std::vector<EValue*> list_storage_;  // boxed list items, stable addresses
  std::vector<double> double_storage_;
  std::unique_ptr<bool[]> bool_storage_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_storage_;  // unplanned input and output tensors
  std::vector<bool> planned_;                              // per value: tensor has planned or constant data
  struct Placement {                                       // a tensor planned in an arena
    Tensor* tensor;
    uint32_t memory_id;
    uint64_t offset;
    size_t nbytes;
  };
  std::vector<Placement> placements_;
  std::vector<int32_t> input_indices_;
  std::vector<int32_t> output_indices_;

  std::vector<EValue*> arg_storage_;
  std::vector<Step> steps_;
  std::vector<uint32_t> chain_begin_;  // steps_ index where each chain starts, plus the end
  std::vector<std::unique_ptr<DelegateHandle>> delegates_;
};

}  // namespace etna
