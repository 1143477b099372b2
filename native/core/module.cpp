#include "module.h"

#include <algorithm>
#include <cstring>

#include "program_info.h"
#include "state_snapshot.h"

namespace etna {
namespace {

std::vector<int64_t> plan_of(const fb::ExecutionPlan& plan) {
  std::vector<int64_t> sizes;
  const auto* stored = plan.non_const_buffer_sizes();
  for (uint32_t i = 0; i < stored->size(); ++i) sizes.push_back(element(stored, i));
  return sizes;
}

// A tensor placed in the state arena (mem_id 2) by one method.
struct StateTensor {
  size_t method = 0;
  uint32_t value = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  int dtype = 0;
  std::string name;  // fully qualified name, when the exporter wrote one
};

std::string range_text(uint64_t offset, uint64_t nbytes) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + nbytes) + ")";
}

// The first tensor the loader writes into mem_id 1 (an initial value or
// external data), described for the report; empty when there is none. Such
// bytes live from load time into calls, so mem_id 1 cannot be lent per call.
std::string loaded_into_activations(const Program& p) {
  for (size_t m = 0; m < p.method_count(); ++m) {
    const auto* values = p.method(m).values();
    for (uint32_t i = 0; i < values->size(); ++i) {
      const fb::Tensor* tensor = values->Get(i)->val_as_Tensor();
      if (!tensor || !tensor->allocation_info() || tensor->allocation_info()->memory_id() != 1) continue;
      const fb::ExtraTensorInfo* extra = tensor->extra_tensor_info();
      const bool external = extra && extra->location() == fb::TensorDataLocation::EXTERNAL;
      if (tensor->data_buffer_idx() > 0 || external) {
        return "'" + p.method(m).name()->str() + "' values[" + std::to_string(i) + "]";
      }
    }
  }
  return std::string();
}

// Every tensor that any method places in mem_id 2, by offset.
std::vector<StateTensor> state_tensors(const Program& p) {
  std::vector<StateTensor> state;
  for (size_t m = 0; m < p.method_count(); ++m) {
    const auto* values = p.method(m).values();
    for (uint32_t i = 0; i < values->size(); ++i) {
      const fb::Tensor* tensor = values->Get(i)->val_as_Tensor();
      if (!tensor || !tensor->allocation_info() || tensor->allocation_info()->memory_id() != 2) continue;
      StateTensor entry;
      entry.method = m;
      entry.value = i;
      entry.offset = planned_offset(*tensor->allocation_info());
      entry.nbytes = tensor_nbytes(*tensor).value_or(0);
      entry.dtype = static_cast<int>(tensor->scalar_type());
      if (const auto* extra = tensor->extra_tensor_info()) {
        if (extra->fully_qualified_name()) entry.name = extra->fully_qualified_name()->str();
      }
      if (entry.nbytes > 0) state.push_back(std::move(entry));
    }
  }
  std::sort(state.begin(), state.end(), [](const StateTensor& a, const StateTensor& b) { return a.offset < b.offset; });
  return state;
}

// The state a snapshot carries: the bytes the planned tensors cover, merged,
// and fingerprints of where each tensor sits and of the program.
StateLayout state_layout_of(const Program& p, uint64_t arena_bytes) {
  StateLayout layout;
  layout.arena_bytes = arena_bytes;
  layout.program_fingerprint = p.fingerprint();
  uint64_t h = fingerprint_bytes(reinterpret_cast<const uint8_t*>(&arena_bytes), sizeof arena_bytes);
  for (const StateTensor& t : state_tensors(p)) {
    const uint64_t fields[3] = {t.offset, t.nbytes, static_cast<uint64_t>(t.dtype)};
    h = fingerprint_bytes(reinterpret_cast<const uint8_t*>(fields), sizeof fields, h);
    h = fingerprint_bytes(reinterpret_cast<const uint8_t*>(t.name.data()), t.name.size(), h);
    if (!layout.ranges.empty() && t.offset <= layout.ranges.back().offset + layout.ranges.back().size) {
      ByteRange& last = layout.ranges.back();
      last.size = std::max(last.size, t.offset + t.nbytes - last.offset);
    } else {
      layout.ranges.push_back(ByteRange{t.offset, t.nbytes});
    }
  }
  layout.layout_fingerprint = h;
  return layout;
}

}  // namespace

ArenaSharing parse_sharing(const std::string& text, bool* ok) {
  *ok = true;
  if (text == "auto") return ArenaSharing::kAuto;
  if (text == "true") return ArenaSharing::kOn;
  if (text == "false") return ArenaSharing::kOff;
  if (text == "state") return ArenaSharing::kState;
  *ok = false;
  return ArenaSharing::kAuto;
}

Module::~Module() {
  // Methods hold delegate handles that point into backend contexts.
  methods_.clear();
  backend_contexts_.clear();
}

Result<std::unique_ptr<Module>> Module::load(std::shared_ptr<const Program> program, const ModuleOptions& options) {
  std::unique_ptr<Module> module(new Module());
  module->program_ = std::move(program);
  module->options_ = options;
  module->thread_pool_ =
      ThreadPools::process().acquire(static_cast<size_t>(std::max(options.num_threads, 1)), options.thread_pool);
  const Program& p = *module->program_;
  const size_t count = p.method_count();
  std::vector<size_t> all_methods;
  for (size_t m = 0; m < count; ++m) {
    module->method_names_.push_back(p.method(m).name()->str());
    module->method_constant_bytes_.push_back(method_constant_bytes(p, m));
    all_methods.push_back(m);
  }
  // Methods of one program read one constant storage: count each buffer once.
  module->constant_bytes_ = constant_bytes_read(p, all_methods);
  module->methods_.resize(count);
  module->method_memory_.resize(count);

  size_t state_planners = 0;
  for (size_t m = 0; m < count; ++m) {
    const auto sizes = plan_of(p.method(m));
    if (sizes.size() > 2 && sizes[2] > 0) ++state_planners;
  }
  switch (options.sharing) {
    case ArenaSharing::kAuto:
      if (state_planners >= 2) {
        module->sharing_ = ArenaSharing::kOn;
        module->reason_ = std::to_string(state_planners) +
                          " methods plan a mem_id 2 state arena: the program was exported with shared state";
      } else {
        module->sharing_ = ArenaSharing::kOff;
        module->reason_ = state_planners == 1 ? "only one method plans a mem_id 2 arena: nothing to share"
                                              : "no method plans a mem_id 2 state arena";
      }
      break;
    case ArenaSharing::kOn:
      module->sharing_ = ArenaSharing::kOn;
      module->reason_ = "shareMemoryArenas: true";
      break;
    case ArenaSharing::kOff:
      module->sharing_ = ArenaSharing::kOff;
      module->reason_ = "shareMemoryArenas: false";
      break;
    case ArenaSharing::kState:
      module->sharing_ = ArenaSharing::kState;
      module->reason_ = "shareMemoryArenas: \"state\"";
      break;
  }

  // Shared, the state is the one arena (laid out below); unshared, it is the
  // mem_id 2 arena of the one method that plans one, if only one does.
  if (!module->sharing_state() && state_planners > 1) {
    module->state_refusal_ = std::to_string(state_planners) +
                             " methods keep a mem_id 2 state arena each (shareMemoryArenas: false), so the module "
                             "has no one state; load it with shareMemoryArenas 'auto', true or 'state'";
  } else if (!module->sharing_state()) {
    uint64_t state_bytes = 0;
    for (size_t m = 0; m < count; ++m) {
      const auto sizes = plan_of(p.method(m));
      if (sizes.size() > 2 && sizes[2] > 0) {
        module->state_method_ = m;
        state_bytes = static_cast<uint64_t>(sizes[2]);
      }
    }
    module->state_layout_ = state_layout_of(p, state_bytes);
  }

  if (module->sharing_ != ArenaSharing::kOff) {
    ETNA_TRY(module->check_shared_plans());
    uint64_t activations = 0;
    uint64_t state = 0;
    for (size_t m = 0; m < count; ++m) {
      const auto sizes = plan_of(p.method(m));
      if (sizes.size() > 1) activations = std::max<uint64_t>(activations, static_cast<uint64_t>(sizes[1]));
      if (sizes.size() > 2) state = std::max<uint64_t>(state, static_cast<uint64_t>(sizes[2]));
    }
    ArenaPool::Lease loading;  // pooled: the arena the methods bind to while they load
    if (module->sharing_ == ArenaSharing::kOn) {
      module->activation_bytes_ = activations;
      const std::string loaded = loaded_into_activations(p);
      module->pooled_activations_ = loaded.empty();
      if (module->pooled_activations_) {
        module->reason_ += "; mem_id 1 holds nothing between calls, so each call borrows it from the program's pool";
        auto lease = module->borrow_activations();
        if (!lease) return lease.error();
        loading = std::move(*lease);
        module->shared_activations_ = loading.shared();
      } else {
        module->reason_ += "; the module owns its mem_id 1 arena: " + loaded + " is loaded into it";
        auto arena = Arena::allocate(static_cast<size_t>(activations));
        if (!arena) return arena.error();
        module->shared_activations_ = std::move(*arena);
      }
    }
    auto arena = Arena::allocate(static_cast<size_t>(state));
    if (!arena) return arena.error();
    module->shared_state_ = std::move(*arena);
    module->state_layout_ = state_layout_of(p, state);
    // Load everything now so no later load re-initialises live state.
    for (size_t m = 0; m < count; ++m) ETNA_TRY(module->load_method(m));
    // Pooled: calls bind their own borrowed arena; the module keeps none.
    if (module->pooled_activations_) module->shared_activations_.reset();
  }
  return module;
}

Result<ArenaPool::Lease> Module::borrow_activations() const {
  const size_t bytes = static_cast<size_t>(activation_bytes_);
  return program_->activation_pool().borrow([bytes](const Arena& arena) { return arena.size() >= bytes; },
                                            [bytes] { return Arena::allocate(bytes); });
}

Status Module::check_shared_plans() const {
  const Program& p = *program_;
  std::optional<std::pair<size_t, int64_t>> state_size;  // first method with a state arena, its size
  for (size_t m = 0; m < p.method_count(); ++m) {
    const fb::ExecutionPlan& plan = p.method(m);
    if (const auto* devices = plan.non_const_buffer_device()) {
      for (const fb::NonConstBufferDevice* device : *devices) {
        if (device->device_type() != fb::DeviceType::CPU) {
          return make_error(ErrorCode::kMemoryPlanConflict,
                            "method '" + method_names_[m] + "' places arena " + std::to_string(device->buffer_idx()) +
                                " on a non-CPU device; such arenas cannot be shared (use shareMemoryArenas: false)");
        }
      }
    }
    const auto sizes = plan_of(plan);
    if (sizes.size() > 2) {
      if (!state_size) {
        state_size = std::make_pair(m, sizes[2]);
      } else if (state_size->second != sizes[2]) {
        return make_error(ErrorCode::kMemoryPlanConflict,
                          "methods '" + method_names_[state_size->first] + "' and '" + method_names_[m] +
                              "' plan different state arenas (mem_id 2: " + std::to_string(state_size->second) +
                              " vs " + std::to_string(sizes[2]) + " bytes); they were not exported to share state");
      }
    }
  }
  const std::vector<StateTensor> state = state_tensors(p);
  // Same bytes must mean the same tensor in every method: overlapping state
  // tensors of different methods agree on offset, size and dtype.
  auto describe = [&](const StateTensor& t) {
    return "'" + method_names_[t.method] + "' values[" + std::to_string(t.value) + "]" +
           (t.name.empty() ? "" : " ('" + t.name + "')") + " " +
           std::string(dtype_name(static_cast<ScalarType>(t.dtype))) + " at " + range_text(t.offset, t.nbytes);
  };
  for (size_t a = 0; a < state.size(); ++a) {
    for (size_t b = a + 1; b < state.size() && state[b].offset < state[a].offset + state[a].nbytes; ++b) {
      if (state[a].method == state[b].method) continue;
      const bool same =
          state[a].offset == state[b].offset && state[a].nbytes == state[b].nbytes && state[a].dtype == state[b].dtype;
      if (!same) {
        return make_error(ErrorCode::kMemoryPlanConflict, "state tensors overlap without matching: " +
                                                              describe(state[a]) + " and " + describe(state[b]) +
                                                              " share bytes of mem_id 2 but differ in offset, size or "
                                                              "dtype; sharing state would corrupt it");
      }
    }
  }
  for (size_t a = 0; a < state.size(); ++a) {
    for (size_t b = a + 1; b < state.size(); ++b) {
      if (state[a].name.empty() || state[a].name != state[b].name) continue;
      if (state[a].offset != state[b].offset || state[a].nbytes != state[b].nbytes ||
          state[a].dtype != state[b].dtype) {
        return make_error(ErrorCode::kMemoryPlanConflict, "state '" + state[a].name + "' is placed differently: " +
                                                              describe(state[a]) + " vs " + describe(state[b]));
      }
    }
  }
  return Status::ok();
}

Result<MethodMemory> Module::memory_for(size_t method_index) {
  const auto sizes = plan_of(program_->method(method_index));
  MethodMemory memory;
  for (size_t id = 1; id < sizes.size(); ++id) {
    if (id == 1 && sharing_ == ArenaSharing::kOn) {
      memory.arenas.push_back(shared_activations_);
    } else if (id == 2 && sharing_ != ArenaSharing::kOff) {
      memory.arenas.push_back(shared_state_);
    } else {
      auto arena = Arena::allocate(static_cast<size_t>(sizes[id]));
      if (!arena) return arena.error();
      memory.arenas.push_back(std::move(*arena));
    }
  }
  return memory;
}

BackendModuleContext* Module::backend_context(const Backend& backend) {
  std::lock_guard<std::mutex> lock(report_mutex_);
  auto& context = backend_contexts_[std::string(backend.id())];
  if (!context) {
    BackendOptions options;
    options.num_threads = options_.num_threads;
    options.thread_pool = options_.thread_pool;
    options.pool = thread_pool_;
    options.share_workspace = sharing_ == ArenaSharing::kOn;
    context = backend.create_module_context(options);
  }
  return context.get();
}

Result<size_t> Module::method_index(const std::string& name) const {
  auto index = program_->find_method(name);
  if (!index) {
    std::string names;
    for (const std::string& n : method_names_) names += (names.empty() ? "'" : ", '") + n + "'";
    return make_error(ErrorCode::kMethodNotFound, "no method named '" + name + "' (this program has " +
                                                      (names.empty() ? "no methods" : names) + ")");
  }
  return *index;
}

Status Module::load_method(const std::string& name) {
  auto index = method_index(name);
  if (!index) return index.error();
  return load_method(*index);
}

Status Module::load_method(size_t index) {
  if (methods_[index]) return Status::ok();
  ETNA_TRY(check_unchanged(*program_, options_.external_data.get()));
  auto memory = memory_for(index);
  if (!memory) return memory.error();
  {
    std::lock_guard<std::mutex> lock(report_mutex_);
    method_memory_[index] = *memory;
    // A pooled arena is not the module's: reported apart (see memory_report).
    if (pooled_activations_ && !method_memory_[index].arenas.empty()) method_memory_[index].arenas[0] = nullptr;
  }
  auto method = Method::load(
      program_, index, std::move(*memory), [this](const Backend& backend) { return backend_context(backend); },
      options_.external_data);
  if (!method) {
    std::lock_guard<std::mutex> lock(report_mutex_);
    method_memory_[index] = MethodMemory();
    return method.error();
  }
  methods_[index] = std::move(*method);
  release_pages_read_at_load(*program_, options_.external_data.get());
  return Status::ok();
}

Result<std::vector<size_t>> Module::output_capacities(const std::string& name) {
  auto index = method_index(name);
  if (!index) return index.error();
  ETNA_TRY(load_method(*index));
  const Method& method = *methods_[*index];
  std::vector<size_t> capacities;
  for (size_t i = 0; i < method.output_count(); ++i) capacities.push_back(method.output_capacity(i));
  return capacities;
}

Result<std::unique_ptr<Module::Call>> Module::begin_call(const std::string& name, const std::vector<InputValue>& inputs,
                                                         std::vector<OutputBuffer> outputs) {
  auto index = method_index(name);
  if (!index) return index.error();
  return begin_call(*index, inputs, std::move(outputs));
}

Result<std::unique_ptr<Module::Call>> Module::begin_call(size_t index, const std::vector<InputValue>& inputs,
                                                         std::vector<OutputBuffer> outputs) {
  if (index >= methods_.size()) {
    return make_error(ErrorCode::kMethodNotFound, "no method at index " + std::to_string(index) +
                                                      " (this program has " + std::to_string(methods_.size()) +
                                                      " methods)");
  }
  if (call_running_.exchange(true, std::memory_order_acquire)) {
    return make_error(ErrorCode::kInternal, "module is already running a call; calls must be serialized");
  }
  // From here the Call owns the lease and gives it back when destroyed.
  std::unique_ptr<Call> call(new Call(*this, index, std::move(outputs)));
  if (pooled_activations_) {
    // Held until the call ends: inputs are copied into it now, outputs out of it last.
    auto lease = borrow_activations();
    if (!lease) return lease.error();
    call->activations_ = std::move(*lease);
    methods_[index]->use_arena(1, call->activations_.shared());
  }
  if (Method* method = methods_[index].get()) {
    ETNA_TRY(method->validate_outputs(call->outputs_));
    ETNA_TRY(method->set_inputs(inputs));
    call->bound_ = true;
    return call;
  }
  // Not loaded yet: loading belongs on the thread that runs the call, so keep
  // copies of the inputs until then.
  call->captured_ = inputs;
  call->captured_bytes_.reserve(inputs.size());
  for (InputValue& input : call->captured_) {
    if (input.kind != InputValue::Kind::kTensor || input.tensor.data == nullptr) continue;
    const auto* bytes = static_cast<const uint8_t*>(input.tensor.data);
    call->captured_bytes_.emplace_back(bytes, bytes + input.tensor.nbytes);
    input.tensor.data = call->captured_bytes_.back().data();
  }
  return call;
}

Module::Call::~Call() { module_.call_running_.store(false, std::memory_order_release); }

Result<std::vector<OutputValue>> Module::Call::run(std::vector<ProfileEvent>* profile) {
  ETNA_TRY(check_unchanged(*module_.program_, module_.options_.external_data.get()));
  ETNA_TRY(module_.load_method(method_index_));
  Method& method = *module_.methods_[method_index_];
  if (!bound_) {
    ETNA_TRY(method.validate_outputs(outputs_));
    ETNA_TRY(method.set_inputs(captured_));
    bound_ = true;
    captured_.clear();
    captured_bytes_.clear();
  }
  ThreadPool* pool = module_.thread_pool_.get();
  {
    // The workers spin between the call's operators, kernels and delegates
    // alike, and sleep once it ends (unless another call is on the pool).
    const ThreadPool::Call on_pool(pool);
    if (profile != nullptr) {
      ProfileRecorder recorder(method.profile_capacity());
      ETNA_TRY(method.execute(&recorder, pool ? pool->get() : nullptr));
      *profile = recorder.take();
    } else {
      ETNA_TRY(method.execute(nullptr, pool ? pool->get() : nullptr));
    }
  }
  std::vector<OutputValue> results;
  for (size_t i = 0; i < method.output_count(); ++i) {
    auto value = method.read_output(i, outputs_[i]);
    if (!value) return value.error();
    results.push_back(std::move(*value));
  }
  return results;
}

Result<std::vector<OutputValue>> Module::execute(const std::string& name, const std::vector<InputValue>& inputs,
                                                 const std::vector<OutputBuffer>& outputs) {
  auto call = begin_call(name, inputs, outputs);
  if (!call) return call.error();
  return (*call)->run();
}

Module::StateLease::~StateLease() {
  if (module_ != nullptr) module_->call_running_.store(false, std::memory_order_release);
}

Result<Module::StateLease> Module::lease_state() {
  if (!state_layout_) return make_error(ErrorCode::kInvalidInput, state_refusal_);
  if (call_running_.exchange(true, std::memory_order_acquire)) {
    return make_error(ErrorCode::kInternal, "module is running a call; state can be saved or restored between calls");
  }
  StateLease lease(this);
  if (state_method_) ETNA_TRY(load_method(*state_method_));
  if (state_layout_->arena_bytes > 0) {
    lease.arena_ = state_method_ ? method_memory_[*state_method_].arenas[1]->data() : shared_state_->data();
  }
  return lease;
}

Result<const StateLayout*> Module::state_layout() const {
  if (!state_layout_) return make_error(ErrorCode::kInvalidInput, state_refusal_);
  return &*state_layout_;
}

Result<StateLayout> Module::state_layout(const std::vector<ByteRange>& ranges) const {
  if (!state_layout_) return make_error(ErrorCode::kInvalidInput, state_refusal_);
  ETNA_TRY(check_state_ranges(ranges, state_layout_->arena_bytes));
  StateLayout partial = *state_layout_;
  partial.ranges = ranges;
  return partial;
}

Status Module::save_state(const StateLayout& layout, uint8_t* out, size_t size) {
  auto lease = lease_state();
  if (!lease) return lease.error();
  if (size != layout.snapshot_bytes()) {
    return make_error(ErrorCode::kInvalidInput, "save_state: the buffer holds " + std::to_string(size) +
                                                    " bytes, the snapshot needs " +
                                                    std::to_string(layout.snapshot_bytes()));
  }
  write_state_snapshot(layout, lease->arena_, out);
  return Status::ok();
}

Status Module::restore_state(const uint8_t* snapshot, size_t size) {
  auto lease = lease_state();
  if (!lease) return lease.error();
  return read_state_snapshot(*state_layout_, snapshot, size, lease->arena_);
}

Status Module::copy_state_to(Module& target, const std::vector<ByteRange>& ranges) {
  if (&target == this) return make_error(ErrorCode::kInvalidInput, "copyStateTo: the target is this module");
  auto layout = state_layout(ranges);
  if (!layout) return layout.error();
  auto target_layout = target.state_layout();
  if (!target_layout) return target_layout.error();
  if ((*target_layout)->layout_fingerprint != layout->layout_fingerprint ||
      (*target_layout)->program_fingerprint != layout->program_fingerprint) {
    return make_error(ErrorCode::kInvalidInput,
                      "copyStateTo: the target module's state is laid out otherwise (a module of another program)");
  }
  auto source = lease_state();
  if (!source) return source.error();
  auto destination = target.lease_state();
  if (!destination) return destination.error();
  for (const ByteRange& range : ranges) {
    if (range.size > 0) std::memcpy(destination->arena_ + range.offset, source->arena_ + range.offset, range.size);
  }
  return Status::ok();
}

Status Module::populate_state(const std::vector<ByteRange>& ranges) {
  auto layout = state_layout(ranges);
  if (!layout) return layout.error();
  auto lease = lease_state();
  if (!lease) return lease.error();
  for (const ByteRange& range : ranges) {
    if (range.size > 0) populate_pages(lease->arena_ + range.offset, range.size);
  }
  return Status::ok();
}

MemoryReport Module::memory_report() const {
  MemoryReport report;
  report.mode = sharing_ == ArenaSharing::kOn ? "shared" : sharing_ == ArenaSharing::kState ? "state" : "unshared";
  report.reason = reason_;
  report.constant_bytes = constant_bytes_;
  for (size_t m = 0; m < method_names_.size(); ++m) {
    report.methods.push_back(MethodConstantReport{method_names_[m], method_constant_bytes_[m]});
  }
  const Program& p = *program_;
  // Loads on a call's thread add arenas and backend contexts; sizes inside a
  // backend context are read under its own lock.
  std::lock_guard<std::mutex> lock(report_mutex_);
  std::map<const Arena*, size_t> seen;  // arena -> index in report.arenas
  for (size_t m = 0; m < p.method_count(); ++m) {
    const auto sizes = plan_of(p.method(m));
    for (size_t id = 1; id < sizes.size(); ++id) report.unshared_planned_bytes += static_cast<uint64_t>(sizes[id]);
    const MethodMemory& memory = method_memory_[m];
    for (size_t k = 0; k < memory.arenas.size(); ++k) {
      const Arena* arena = memory.arenas[k].get();  // null: the pooled activations
      auto it = seen.find(arena);
      if (it == seen.end()) {
        ArenaReport entry;
        entry.memory_id = static_cast<uint32_t>(k + 1);
        entry.bytes = arena ? arena->size() : activation_bytes_;
        entry.shared = (k == 0 && sharing_ == ArenaSharing::kOn) || (k == 1 && sharing_ != ArenaSharing::kOff);
        entry.pooled = arena == nullptr;
        seen[arena] = report.arenas.size();
        report.arenas.push_back(entry);
        report.planned_bytes += entry.bytes;
        if (entry.pooled) report.pooled_arena_bytes = entry.bytes;
        if (arena != nullptr) report.untouched_bytes += arena->size() - arena->resident_bytes();
        it = seen.find(arena);
      }
      report.arenas[it->second].methods.push_back(method_names_[m]);
    }
  }
  for (const auto& [id, context] : backend_contexts_) {
    const BackendMemory memory = context->memory();
    report.packed_weight_bytes += memory.packed_weight_bytes;
    report.shared_packed_weight_bytes += memory.shared_packed_weight_bytes;
    report.workspace_bytes += memory.workspace_bytes;
    report.pooled_workspace_bytes += memory.pooled_workspace_bytes;
  }
  report.shared_bytes = report.shared_packed_weight_bytes + report.pooled_arena_bytes + report.pooled_workspace_bytes;
  report.owned_bytes = report.planned_bytes + report.workspace_bytes + report.packed_weight_bytes - report.shared_bytes;
  return report;
}

}  // namespace etna
