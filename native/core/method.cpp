#include "method.h"

#include <cmath>
#include <cstring>

namespace etna {
namespace {

// Guards against programs that jump forever (the format allows loops).
constexpr uint64_t kMaxInstructionsPerCall = 10'000'000;

std::string shape_text(const std::vector<int64_t>& shape) { return etna::shape_text(shape.data(), shape.size()); }

std::string tensor_text(ScalarType dtype, const std::vector<int64_t>& shape) {
  return etna::tensor_text(dtype, shape.data(), shape.size());
}

const char* input_kind_name(InputValue::Kind kind) {
  switch (kind) {
    case InputValue::Kind::kNone: return "none";
    case InputValue::Kind::kInt: return "int";
    case InputValue::Kind::kDouble: return "double";
    case InputValue::Kind::kBool: return "bool";
    case InputValue::Kind::kString: return "string";
    case InputValue::Kind::kTensor: return "tensor";
  }
  return "unknown";
}

const char* slot_kind_name(EValue::Kind kind) {
  switch (kind) {
    case EValue::Kind::kNone: return "none";
    case EValue::Kind::kInt: return "int";
    case EValue::Kind::kDouble: return "double";
    case EValue::Kind::kBool: return "bool";
    case EValue::Kind::kString: return "string";
    case EValue::Kind::kTensor: return "tensor";
    default: return "list";
  }
}

}  // namespace

Method::~Method() = default;

Result<std::unique_ptr<Method>> Method::load(std::shared_ptr<const Program> program, size_t method_index,
                                             MethodMemory memory, const BackendContextProvider& backends,
                                             std::shared_ptr<const DataMap> external_data) {
  std::unique_ptr<Method> method(new Method());
  method->program_ = std::move(program);
  method->external_data_ = std::move(external_data);
  method->plan_ = &method->program_->method(method_index);
  method->name_ = method->plan_->name()->str();

  const auto* sizes = method->plan_->non_const_buffer_sizes();
  for (uint32_t id = 1; id < sizes->size(); ++id) {
    const auto needed = static_cast<uint64_t>(element(sizes, id));
    if (memory.arenas.size() < id || !memory.arenas[id - 1] || memory.arenas[id - 1]->size() < needed) {
      return make_error(ErrorCode::kInternal, "method '" + method->name_ + "': arena for mem_id " + std::to_string(id) +
                                                  " is missing or smaller than its " + std::to_string(needed) +
                                                  "-byte plan");
    }
  }
  ETNA_TRY(method->bind_values(memory));
  method->memory_ = std::move(memory);
  for (int32_t index : *method->plan_->inputs()) method->input_indices_.push_back(index);
  for (int32_t index : *method->plan_->outputs()) method->output_indices_.push_back(index);
  ETNA_TRY(method->prepare_steps(backends));
  return method;
}

Status Method::bind_values(MethodMemory& memory) {
  const auto* values = plan_->values();
  const size_t count = values->size();
  size_t tensor_count = 0;
  size_t list_items = 0;
  size_t double_items = 0;
  size_t bool_items = 0;
  for (const fb::EValue* value : *values) {
    switch (value->val_type()) {
      case fb::KernelTypes::Tensor: ++tensor_count; break;
      case fb::KernelTypes::IntList: list_items += value->val_as_IntList()->items()->size(); break;
      case fb::KernelTypes::TensorList: list_items += value->val_as_TensorList()->items()->size(); break;
      case fb::KernelTypes::OptionalTensorList:
        list_items += value->val_as_OptionalTensorList()->items()->size();
        break;
      case fb::KernelTypes::DoubleList: double_items += value->val_as_DoubleList()->items()->size(); break;
      case fb::KernelTypes::BoolList: bool_items += value->val_as_BoolList()->items()->size(); break;
      default: break;
    }
  }
  // Sized once: EValues hold pointers into these vectors.
  values_.assign(count, EValue::none());
  tensors_.assign(tensor_count, Tensor());
  list_storage_.assign(list_items, nullptr);
  double_storage_.assign(double_items, 0.0);
  bool_storage_ = std::make_unique<bool[]>(bool_items > 0 ? bool_items : 1);
  planned_.assign(count, false);

  size_t next_tensor = 0;
  size_t next_item = 0;
  size_t next_double = 0;
  size_t next_bool = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const fb::EValue* value = values->Get(i);
    switch (value->val_type()) {
      case fb::KernelTypes::IntValue: values_[i] = EValue::from_int(value->val_as_IntValue()->int_val()); break;
      case fb::KernelTypes::BoolValue: values_[i] = EValue::from_bool(value->val_as_BoolValue()->bool_val()); break;
      case fb::KernelTypes::DoubleValue:
        values_[i] = EValue::from_double(value->val_as_DoubleValue()->double_val());
        break;
      case fb::KernelTypes::StringValue:
        values_[i] = EValue::from_string(value->val_as_StringValue()->string_val()->string_view());
        break;
      case fb::KernelTypes::Tensor: {
        Tensor* tensor = &tensors_[next_tensor++];
        values_[i] = EValue::from_tensor(tensor);
        ETNA_TRY(bind_tensor(i, *value->val_as_Tensor(), memory));
        break;
      }
      case fb::KernelTypes::IntList: {
        const auto* items = value->val_as_IntList()->items();
        EValue** begin = list_storage_.data() + next_item;
        for (uint32_t k = 0; k < items->size(); ++k) list_storage_[next_item++] = &values_[element(items, k)];
        values_[i] = EValue::from_int_list(begin, items->size());
        break;
      }
      case fb::KernelTypes::TensorList:
      case fb::KernelTypes::OptionalTensorList: {
        const bool optional = value->val_type() == fb::KernelTypes::OptionalTensorList;
        const auto* items =
            optional ? value->val_as_OptionalTensorList()->items() : value->val_as_TensorList()->items();
        EValue** begin = list_storage_.data() + next_item;
        for (int32_t index : *items) list_storage_[next_item++] = index < 0 ? nullptr : &values_[index];
        values_[i] = EValue::from_tensor_list(begin, items->size(), optional);
        break;
      }
      case fb::KernelTypes::DoubleList: {
        const auto* items = value->val_as_DoubleList()->items();
        double* begin = double_storage_.data() + next_double;
        for (uint32_t k = 0; k < items->size(); ++k) double_storage_[next_double++] = element(items, k);
        values_[i] = EValue::from_double_list(begin, items->size());
        break;
      }
      case fb::KernelTypes::BoolList: {
        const auto* items = value->val_as_BoolList()->items();
        bool* begin = bool_storage_.get() + next_bool;
        for (uint32_t k = 0; k < items->size(); ++k) bool_storage_[next_bool++] = items->Get(k) != 0;
        values_[i] = EValue::from_bool_list(begin, items->size());
        break;
      }
      default: break;  // NullValue
    }
  }
  return Status::ok();
}

Status Method::bind_tensor(size_t value_index, const fb::Tensor& tensor, MethodMemory& memory) {
  const std::string at = "method '" + name_ + "': values[" + std::to_string(value_index) + "]";
  Tensor& t = values_[value_index].to_tensor();
  int64_t sizes[kMaxTensorRank];
  const size_t rank = tensor.sizes()->size();
  for (size_t d = 0; d < rank; ++d) sizes[d] = tensor.sizes()->Get(static_cast<uint32_t>(d));
  t.init(static_cast<ScalarType>(tensor.scalar_type()), rank, sizes, tensor.dim_order()->data(),
         static_cast<ShapeDynamism>(tensor.shape_dynamism()));
  const uint64_t nbytes = *tensor_nbytes(tensor);  // proven at program load

  const fb::ExtraTensorInfo* extra = tensor.extra_tensor_info();
  if (extra && extra->location() == fb::TensorDataLocation::EXTERNAL) {
    ETNA_TRY(bind_external(at, tensor, nbytes, t, memory));
    planned_[value_index] = true;
    return Status::ok();
  }
  if (const fb::AllocationDetails* allocation = tensor.allocation_info()) {
    place(t, *allocation, static_cast<size_t>(nbytes), memory);
    planned_[value_index] = true;
    if (tensor.data_buffer_idx() > 0) {
      auto initial = program_->mutable_initial_data(tensor.data_buffer_idx(), nbytes);
      if (!initial) return make_error(ErrorCode::kInvalidProgram, at + ": " + initial.error().message);
      if (nbytes > 0) std::memcpy(t.data(), initial->data, static_cast<size_t>(nbytes));
    }
  } else if (tensor.data_buffer_idx() > 0) {
    auto constant = program_->constant_data(tensor.data_buffer_idx(), nbytes);
    if (!constant) return make_error(ErrorCode::kInvalidProgram, at + ": " + constant.error().message);
    // Constants are read-only; kernels never write their inputs.
    t.set_data(const_cast<uint8_t*>(constant->data), static_cast<size_t>(nbytes));
    planned_[value_index] = true;
  }
  return Status::ok();
}

Status Method::bind_external(const std::string& at, const fb::Tensor& tensor, uint64_t nbytes, Tensor& t,
                             MethodMemory& memory) {
  const std::string key = tensor.extra_tensor_info()->fully_qualified_name()->str();
  if (!external_data_) {
    return make_error(ErrorCode::kInvalidProgram, at + " takes its data from external data ('" + key +
                                                      "'); load the module with its .ptd file (externalData)");
  }
  auto blob = external_data_->find(key);
  if (!blob) return make_error(ErrorCode::kInvalidProgram, at + ": the external data has no tensor '" + key + "'");
  if (blob->has_layout) {
    const bool same_dtype = blob->scalar_type == static_cast<int>(tensor.scalar_type());
    bool same_sizes = blob->sizes.size() == tensor.sizes()->size();
    for (size_t d = 0; same_sizes && d < blob->sizes.size(); ++d) {
      same_sizes = blob->sizes[d] == tensor.sizes()->Get(static_cast<uint32_t>(d));
    }
    bool same_order = blob->dim_order.empty() || blob->dim_order.size() == tensor.dim_order()->size();
    for (size_t d = 0; same_order && d < blob->dim_order.size(); ++d) {
      same_order = blob->dim_order[d] == tensor.dim_order()->Get(static_cast<uint32_t>(d));
    }
    if (!same_dtype || !same_sizes || !same_order) {
      return make_error(ErrorCode::kInvalidProgram,
                        at + ": external tensor '" + key + "' is stored as " +
                            std::string(dtype_name(static_cast<ScalarType>(blob->scalar_type))) +
                            " with another shape or dim order than the program's " + t.describe());
    }
  }
  if (blob->bytes.size < nbytes) {
    return make_error(ErrorCode::kInvalidProgram, at + ": external tensor '" + key + "' holds " +
                                                      std::to_string(blob->bytes.size) + " bytes; " + t.describe() +
                                                      " needs " + std::to_string(nbytes));
  }
  if (const fb::AllocationDetails* allocation = tensor.allocation_info()) {
    // Mutable (e.g. trainable) tensor: planned memory, initialised from the file.
    place(t, *allocation, static_cast<size_t>(nbytes), memory);
    if (nbytes > 0) std::memcpy(t.data(), blob->bytes.data, static_cast<size_t>(nbytes));
  } else {
    t.set_data(const_cast<uint8_t*>(blob->bytes.data), static_cast<size_t>(nbytes));
  }
  return Status::ok();
}

void Method::place(Tensor& tensor, const fb::AllocationDetails& allocation, size_t nbytes, MethodMemory& memory) {
  const uint32_t memory_id = allocation.memory_id();
  const uint64_t offset = planned_offset(allocation);
  tensor.set_data(memory.arenas[memory_id - 1]->data() + offset, nbytes);
  placements_.push_back(Placement{&tensor, memory_id, offset, nbytes});
}

void Method::use_arena(uint32_t memory_id, const std::shared_ptr<Arena>& arena) {
  if (memory_id == 0 || memory_id > memory_.arenas.size()) return;  // the method plans no such arena
  std::shared_ptr<Arena>& current = memory_.arenas[memory_id - 1];
  if (current == arena) return;  // the usual case: the same arena as last call
  for (const Placement& p : placements_) {
    if (p.memory_id == memory_id) p.tensor->set_data(arena->data() + p.offset, p.nbytes);
  }
  current = arena;
}

Status Method::prepare_steps(const BackendContextProvider& backends) {
  // Delegates first: each BackendDelegate entry is initialised once.
  const auto* delegates = plan_->delegates();
  for (uint32_t d = 0; d < delegates->size(); ++d) {
    const fb::BackendDelegate* entry = delegates->Get(d);
    const std::string id = entry->id()->str();
    const Backend* backend = find_backend(id);
    if (backend == nullptr) {
      return make_error(ErrorCode::kUnsupportedBackend,
                        "method '" + name_ + "': delegate " + std::to_string(d) + " needs backend '" + id +
                            "', which etna does not provide (it provides " + registered_backend_ids() + ")");
    }
    std::vector<CompileSpecView> specs;
    if (const auto* list = entry->compile_specs()) {
      for (const fb::CompileSpec* spec : *list) {
        specs.push_back(
            CompileSpecView{spec->key()->string_view(), ByteSpan{spec->value()->data(), spec->value()->size()}});
      }
    }
    DelegateInitContext context{*program_, backends(*backend), name_, d};
    auto handle = backend->init(program_->delegate_payload(*entry), specs, context);
    if (!handle) return handle.error();  // backends name the method and delegate themselves
    delegates_.push_back(std::move(*handle));
  }

  const KernelRegistry& registry = kernel_registry();
  std::vector<std::string> missing;
  size_t total_args = 0;
  for (const fb::Chain* chain : *plan_->chains()) {
    for (const fb::Instruction* instruction : *chain->instructions()) {
      if (const auto* call = instruction->instr_args_as_KernelCall()) total_args += call->args()->size();
      if (const auto* call = instruction->instr_args_as_DelegateCall()) total_args += call->args()->size();
    }
  }
  arg_storage_.reserve(total_args);
  for (const fb::Chain* chain : *plan_->chains()) {
    chain_begin_.push_back(static_cast<uint32_t>(steps_.size()));
    for (const fb::Instruction* instruction : *chain->instructions()) {
      Step step;
      step.kind = instruction->instr_args_type();
      const flatbuffers::Vector<int32_t>* args = nullptr;
      switch (step.kind) {
        case fb::InstructionArguments::KernelCall: {
          const fb::KernelCall* call = instruction->instr_args_as_KernelCall();
          step.label = operator_key(*plan_->operators()->Get(static_cast<uint32_t>(call->op_index())));
          step.kernel = registry.find(step.label);
          if (step.kernel == nullptr) {
            if (std::find(missing.begin(), missing.end(), step.label) == missing.end()) missing.push_back(step.label);
          } else if (Status arity = check_arity(*step.kernel, call->args()->size()); !arity) {
            return make_error(arity.error().code, "method '" + name_ + "', instruction " +
                                                      std::to_string(steps_.size()) + ": " + arity.error().message);
          }
          args = call->args();
          break;
        }
        case fb::InstructionArguments::DelegateCall: {
          const fb::DelegateCall* call = instruction->instr_args_as_DelegateCall();
          step.delegate = delegates_[static_cast<size_t>(call->delegate_index())].get();
          step.label = plan_->delegates()->Get(static_cast<uint32_t>(call->delegate_index()))->id()->str();
          args = call->args();
          const std::optional<size_t> expected = step.delegate->argument_count();
          if (expected && *expected != args->size()) {
            return make_error(ErrorCode::kInvalidProgram,
                              "method '" + name_ + "': instruction " + std::to_string(steps_.size()) +
                                  " calls delegate " + std::to_string(call->delegate_index()) + " (" + step.label +
                                  ") with " + std::to_string(args->size()) + " arguments; its payload declares " +
                                  std::to_string(*expected) + " inputs and outputs");
          }
          break;
        }
        case fb::InstructionArguments::MoveCall:
          step.label = "MoveCall";
          step.value_index = instruction->instr_args_as_MoveCall()->move_from();
          step.destination = instruction->instr_args_as_MoveCall()->move_to();
          break;
        case fb::InstructionArguments::JumpFalseCall:
          step.label = "JumpFalseCall";
          step.value_index = instruction->instr_args_as_JumpFalseCall()->cond_value_index();
          step.destination = instruction->instr_args_as_JumpFalseCall()->destination_instruction();
          break;
        case fb::InstructionArguments::FreeCall:
          step.label = "FreeCall";
          step.value_index = instruction->instr_args_as_FreeCall()->value_index();
          break;
        default: break;  // rejected at program load
      }
      if (args != nullptr) {
        step.arg_begin = static_cast<uint32_t>(arg_storage_.size());
        step.arg_count = args->size();
        for (int32_t index : *args) arg_storage_.push_back(&values_[static_cast<size_t>(index)]);
      }
      steps_.push_back(std::move(step));
    }
  }
  chain_begin_.push_back(static_cast<uint32_t>(steps_.size()));
  if (!missing.empty()) {
    std::string list;
    for (const std::string& op : missing) list += (list.empty() ? "" : ", ") + op;
    return make_error(ErrorCode::kUnsupportedOperator,
                      "method '" + name_ + "' uses operators etna does not provide: " + list);
  }

  // Unplanned inputs and outputs get host memory of their own (at the upper
  // bound): a call copies its inputs in, so no caller array is read later.
  auto own_storage = [&](int32_t index) {
    EValue& value = values_[static_cast<size_t>(index)];
    if (!value.is_tensor() || planned_[static_cast<size_t>(index)]) return;
    const auto* tensor = plan_->values()->Get(static_cast<uint32_t>(index))->val_as_Tensor();
    const auto nbytes = static_cast<size_t>(*tensor_nbytes(*tensor));
    owned_storage_.push_back(std::make_unique<uint8_t[]>(nbytes > 0 ? nbytes : 1));
    value.to_tensor().set_data(owned_storage_.back().get(), nbytes);
    planned_[static_cast<size_t>(index)] = true;
  };
  for (int32_t index : *plan_->inputs()) own_storage(index);
  for (int32_t index : *plan_->outputs()) own_storage(index);
  return Status::ok();
}

std::string Method::where(size_t step) const {
  return "method '" + name_ + "', instruction " + std::to_string(step) + " (" + steps_[step].label + ")";
}

Status Method::validate_input(size_t i, const InputValue& input) const {
  // Runs on every call: messages are built only on failure.
  auto at = [&]() { return "method '" + name_ + "': input " + std::to_string(i); };
  const EValue& slot = values_[static_cast<size_t>(input_indices_[i])];
  const fb::EValue* stored = plan_->values()->Get(static_cast<uint32_t>(input_indices_[i]));
  auto kind_mismatch = [&]() {
    return make_error(ErrorCode::kInvalidInput,
                      at() + ": expected " + slot_kind_name(slot.kind()) + ", got " + input_kind_name(input.kind));
  };
  switch (slot.kind()) {
    case EValue::Kind::kTensor: {
      if (input.kind != InputValue::Kind::kTensor) return kind_mismatch();
      const fb::Tensor& bound = *stored->val_as_Tensor();
      const auto* expected = bound.sizes();
      const auto dtype = static_cast<ScalarType>(bound.scalar_type());
      const TensorArg& arg = input.tensor;
      auto expected_shape = [&]() { return std::vector<int64_t>(expected->begin(), expected->end()); };
      auto expected_text = [&]() { return tensor_text(dtype, expected_shape()); };
      const bool dynamic = bound.shape_dynamism() != fb::TensorShapeDynamism::STATIC;
      if (arg.dtype != dtype) {
        return make_error(ErrorCode::kInvalidInput, at() + ": expected " + expected_text() + ", got " +
                                                        tensor_text(arg.dtype, arg.shape) + " (dtype differs)");
      }
      if (arg.shape.size() != expected->size()) {
        return make_error(ErrorCode::kInvalidInput, at() + ": expected " + expected_text() + ", got " +
                                                        tensor_text(arg.dtype, arg.shape) + " (rank differs)");
      }
      uint64_t elements = 1;
      uint64_t bound_elements = 1;
      for (uint32_t d = 0; d < expected->size(); ++d) {
        if (arg.shape[d] < 0)
          return make_error(ErrorCode::kInvalidInput, at() + ": negative size in shape " + shape_text(arg.shape));
        if (!dynamic && arg.shape[d] != expected->Get(d)) {
          return make_error(ErrorCode::kInvalidInput, at() + ": expected " + expected_text() + ", got " +
                                                          tensor_text(arg.dtype, arg.shape) + " (shape differs)");
        }
        if (__builtin_mul_overflow(elements, static_cast<uint64_t>(arg.shape[d]), &elements)) {
          return make_error(ErrorCode::kInvalidInput, at() + ": shape " + shape_text(arg.shape) + " overflows");
        }
        bound_elements *= static_cast<uint64_t>(expected->Get(d));
      }
      if (dynamic && elements > bound_elements) {
        return make_error(ErrorCode::kInvalidInput, at() + ": shape " + shape_text(arg.shape) + " has " +
                                                        std::to_string(elements) + " elements; the bound " +
                                                        shape_text(expected_shape()) + " allows " +
                                                        std::to_string(bound_elements));
      }
      const uint64_t nbytes = elements * slot.to_tensor().element_size();
      if (arg.nbytes != nbytes) {
        return make_error(ErrorCode::kInvalidInput, at() + ": shape " + shape_text(arg.shape) + " needs " +
                                                        std::to_string(nbytes) + " bytes of data, got " +
                                                        std::to_string(arg.nbytes));
      }
      if (arg.data == nullptr && nbytes > 0) return make_error(ErrorCode::kInvalidInput, at() + ": tensor has no data");
      return Status::ok();
    }
    case EValue::Kind::kInt:
      if (input.kind != InputValue::Kind::kInt) return kind_mismatch();
      if (input.int_value != slot.to_int()) {
        return make_error(ErrorCode::kInvalidInput, at() + ": this program was exported with the value " +
                                                        std::to_string(slot.to_int()) + ", got " +
                                                        std::to_string(input.int_value));
      }
      return Status::ok();
    case EValue::Kind::kBool:
      if (input.kind != InputValue::Kind::kBool) return kind_mismatch();
      if (input.bool_value != slot.to_bool()) {
        return make_error(ErrorCode::kInvalidInput,
                          at() + ": this program was exported with the value " + (slot.to_bool() ? "true" : "false"));
      }
      return Status::ok();
    case EValue::Kind::kDouble: {
      if (input.kind != InputValue::Kind::kDouble && input.kind != InputValue::Kind::kInt) return kind_mismatch();
      const double given =
          input.kind == InputValue::Kind::kInt ? static_cast<double>(input.int_value) : input.double_value;
      const double baked = slot.to_double();
      const bool equal = (std::isnan(given) && std::isnan(baked)) || given == baked ||
                         std::fabs(given - baked) <= 1e-4 + 1e-5 * std::fabs(baked);
      if (!equal) {
        return make_error(ErrorCode::kInvalidInput, at() + ": this program was exported with the value " +
                                                        std::to_string(baked) + ", got " + std::to_string(given));
      }
      return Status::ok();
    }
    case EValue::Kind::kString:
      if (input.kind != InputValue::Kind::kString) return kind_mismatch();
      if (input.string_value != slot.to_string()) {
        return make_error(ErrorCode::kInvalidInput,
                          at() + ": this program was exported with the value '" + std::string(slot.to_string()) + "'");
      }
      return Status::ok();
    case EValue::Kind::kNone:
      if (input.kind != InputValue::Kind::kNone) return kind_mismatch();
      return Status::ok();
    default: return make_error(ErrorCode::kInvalidInput, at() + ": list inputs are not supported");
  }
}

Status Method::validate_inputs(const std::vector<InputValue>& inputs) const {
  if (inputs.size() != input_indices_.size()) {
    return make_error(ErrorCode::kInvalidInput,
                      "method '" + name_ + "' takes " + std::to_string(input_indices_.size()) + " input" +
                          (input_indices_.size() == 1 ? "" : "s") + ", got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) ETNA_TRY(validate_input(i, inputs[i]));
  return Status::ok();
}

Status Method::set_inputs(const std::vector<InputValue>& inputs) {
  ETNA_TRY(validate_inputs(inputs));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].kind != InputValue::Kind::kTensor) continue;
    Tensor& tensor = values_[static_cast<size_t>(input_indices_[i])].to_tensor();
    const TensorArg& arg = inputs[i].tensor;
    ETNA_TRY(tensor.resize(arg.shape.size(), arg.shape.data()));
    if (arg.nbytes > 0) std::memcpy(tensor.data(), arg.data, arg.nbytes);
  }
  return Status::ok();
}

Status Method::validate_outputs(const std::vector<OutputBuffer>& outputs) const {
  if (outputs.size() != output_indices_.size()) {
    return make_error(ErrorCode::kInvalidInput, "method '" + name_ + "' has " + std::to_string(output_indices_.size()) +
                                                    " outputs; " + std::to_string(outputs.size()) + " buffers given");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!values_[static_cast<size_t>(output_indices_[i])].is_tensor()) continue;
    const size_t needed = output_capacity(i);
    if (outputs[i].capacity < needed || (needed > 0 && outputs[i].data == nullptr)) {
      return make_error(ErrorCode::kInvalidInput,
                        "method '" + name_ + "': output " + std::to_string(i) + " needs " + std::to_string(needed) +
                            " bytes (its upper bound); the destination holds " + std::to_string(outputs[i].capacity));
    }
  }
  return Status::ok();
}

Status Method::execute(ProfileRecorder* profile, pthreadpool_t pool) {
  if (profile == nullptr) return run_steps<false>(nullptr, pool);
  ProfileScope call(profile, ProfileCategory::kCall, name_, -1);
  return run_steps<true>(profile, pool);
}

namespace {

ProfileCategory step_category(fb::InstructionArguments kind) {
  switch (kind) {
    case fb::InstructionArguments::KernelCall: return ProfileCategory::kKernel;
    case fb::InstructionArguments::DelegateCall: return ProfileCategory::kDelegate;
    default: return ProfileCategory::kInstruction;
  }
}

}  // namespace

// Two instantiations, so that the unprofiled loop has no profiling code at all.
template <bool kProfiled>
Status Method::run_steps(ProfileRecorder* profile, pthreadpool_t pool) {
  uint64_t executed = 0;
  for (size_t chain = 0; chain + 1 < chain_begin_.size(); ++chain) {
    const uint32_t begin = chain_begin_[chain];
    const uint32_t count = chain_begin_[chain + 1] - begin;
    uint32_t pc = 0;
    while (pc < count) {
      if (++executed > kMaxInstructionsPerCall) {
        return make_error(ErrorCode::kInvalidProgram, "method '" + name_ + "' ran more than " +
                                                          std::to_string(kMaxInstructionsPerCall) +
                                                          " instructions in one call (a loop that never ends?)");
      }
      const size_t index = begin + pc;
      if constexpr (kProfiled) {
        const Step& step = steps_[index];
        const size_t slot = profile->open(step_category(step.kind), step.label, static_cast<int64_t>(index));
        Status status = run_step(index, pc, profile, pool);
        profile->close(slot);
        if (!status) return status.error();
      } else {
        ETNA_TRY(run_step(index, pc, nullptr, pool));
      }
    }
  }
  return Status::ok();
}

Status Method::run_step(size_t index, uint32_t& pc, ProfileRecorder* profile, pthreadpool_t pool) {
  const Step& step = steps_[index];
  switch (step.kind) {
    case fb::InstructionArguments::KernelCall: {
      Status status =
          step.kernel->fn(KernelArgs{arg_storage_.data() + step.arg_begin, step.arg_count, step.kernel, pool});
      if (!status) return make_error(status.error().code, where(index) + ": " + status.error().message);
      break;
    }
    case fb::InstructionArguments::DelegateCall: {
      Status status = step.delegate->execute(arg_storage_.data() + step.arg_begin, step.arg_count, profile);
      if (!status) return status.error();  // already names the method and delegate
      break;
    }
    case fb::InstructionArguments::MoveCall:
      values_[static_cast<size_t>(step.destination)] = values_[static_cast<size_t>(step.value_index)];
      break;
    case fb::InstructionArguments::JumpFalseCall: {
      const EValue& condition = values_[static_cast<size_t>(step.value_index)];
      bool value = false;
      if (condition.is_bool()) {
        value = condition.to_bool();
      } else if (condition.is_tensor() && condition.to_tensor().dtype() == ScalarType::kBool &&
                 condition.to_tensor().data() != nullptr) {
        const Tensor& tensor = condition.to_tensor();
        const auto* bytes = tensor.data_as<const uint8_t>();
        value = true;
        for (size_t k = 0; k < tensor.numel(); ++k) value = value && bytes[k] != 0;
      } else {
        return make_error(ErrorCode::kInvalidProgram, "method '" + name_ + "', instruction " + std::to_string(index) +
                                                          " (JumpFalseCall): condition is not a bool or bool tensor");
      }
      if (!value) {
        pc = static_cast<uint32_t>(step.destination);
        return Status::ok();
      }
      break;
    }
    case fb::InstructionArguments::FreeCall:
      if (!planned_[static_cast<size_t>(step.value_index)]) {
        values_[static_cast<size_t>(step.value_index)].to_tensor().set_data(nullptr, 0);
      }
      break;
    default: break;
  }
  ++pc;
  return Status::ok();
}

size_t Method::output_capacity(size_t index) const {
  const auto* stored = plan_->values()->Get(static_cast<uint32_t>(output_indices_[index]));
  const fb::Tensor* tensor = stored->val_as_Tensor();
  return tensor ? static_cast<size_t>(tensor_nbytes(*tensor).value_or(0)) : 0;
}

Result<OutputValue> Method::read_output(size_t index, const OutputBuffer& buffer) const {
  const EValue& value = values_[static_cast<size_t>(output_indices_[index])];
  OutputValue out;
  switch (value.kind()) {
    case EValue::Kind::kNone: out.kind = OutputValue::Kind::kNone; break;
    case EValue::Kind::kInt:
      out.kind = OutputValue::Kind::kInt;
      out.int_value = value.to_int();
      break;
    case EValue::Kind::kDouble:
      out.kind = OutputValue::Kind::kDouble;
      out.double_value = value.to_double();
      break;
    case EValue::Kind::kBool:
      out.kind = OutputValue::Kind::kBool;
      out.bool_value = value.to_bool();
      break;
    case EValue::Kind::kString:
      out.kind = OutputValue::Kind::kString;
      out.string_value = std::string(value.to_string());
      break;
    case EValue::Kind::kTensor: {
      const Tensor& tensor = value.to_tensor();
      out.kind = OutputValue::Kind::kTensor;
      out.dtype = tensor.dtype();
      out.shape.assign(tensor.sizes(), tensor.sizes() + tensor.rank());
      out.nbytes = tensor.nbytes();
      // validate_outputs sized the buffer for the upper bound, which no
      // output exceeds; this only keeps a broken invariant from writing past it.
      if (out.nbytes > buffer.capacity) {
        return make_error(ErrorCode::kInternal, "method '" + name_ + "': output " + std::to_string(index) + " (" +
                                                    tensor.describe() + ") needs " + std::to_string(out.nbytes) +
                                                    " bytes; the destination holds " + std::to_string(buffer.capacity));
      }
      if (out.nbytes > 0) {
        if (tensor.data() == nullptr) {
          return make_error(ErrorCode::kInternal,
                            "method '" + name_ + "': output " + std::to_string(index) + " has no data after execution");
        }
        std::memcpy(buffer.data, tensor.data(), out.nbytes);
      }
      break;
    }
    default: out.kind = OutputValue::Kind::kOther; break;
  }
  return out;
}

}  // namespace etna
