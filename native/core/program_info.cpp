#include "program_info.h"

#include <algorithm>
#include <set>

#include "dtype.h"

namespace etna {
namespace {

const char* value_kind(fb::KernelTypes type) {
  switch (type) {
    case fb::KernelTypes::NullValue: return "none";
    case fb::KernelTypes::IntValue: return "int";
    case fb::KernelTypes::BoolValue: return "bool";
    case fb::KernelTypes::DoubleValue: return "double";
    case fb::KernelTypes::Tensor: return "tensor";
    case fb::KernelTypes::StringValue: return "string";
    case fb::KernelTypes::IntList: return "int_list";
    case fb::KernelTypes::DoubleList: return "double_list";
    case fb::KernelTypes::BoolList: return "bool_list";
    case fb::KernelTypes::TensorList: return "tensor_list";
    case fb::KernelTypes::OptionalTensorList: return "optional_tensor_list";
    default: return "none";
  }
}

const char* instruction_kind(fb::InstructionArguments type) {
  switch (type) {
    case fb::InstructionArguments::KernelCall: return "KernelCall";
    case fb::InstructionArguments::DelegateCall: return "DelegateCall";
    case fb::InstructionArguments::MoveCall: return "MoveCall";
    case fb::InstructionArguments::JumpFalseCall: return "JumpFalseCall";
    case fb::InstructionArguments::FreeCall: return "FreeCall";
    default: return "Unknown";
  }
}

const char* dynamism_name(fb::TensorShapeDynamism dynamism) {
  switch (dynamism) {
    case fb::TensorShapeDynamism::DYNAMIC_BOUND: return "bound";
    case fb::TensorShapeDynamism::DYNAMIC_UNBOUND: return "unbound";
    default: return "static";
  }
}

void add_unique(std::vector<std::string>& list, std::string item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
}

}  // namespace

ValueInfo describe_value(const fb::ExecutionPlan& plan, int32_t index) {
  const fb::EValue* value = plan.values()->Get(static_cast<uint32_t>(index));
  ValueInfo info;
  info.kind = value_kind(value->val_type());
  if (const fb::Tensor* tensor = value->val_as_Tensor()) {
    info.dtype = std::string(dtype_name(static_cast<ScalarType>(tensor->scalar_type())));
    for (int32_t dim : *tensor->sizes()) info.shape.push_back(dim);
    info.dynamism = dynamism_name(tensor->shape_dynamism());
    info.planned = tensor->allocation_info() != nullptr || tensor->data_buffer_idx() != 0;
    info.nbytes = tensor_nbytes(*tensor).value_or(0);
    if (const fb::AllocationDetails* allocation = tensor->allocation_info()) {
      info.memory_id = allocation->memory_id();
      info.memory_offset = planned_offset(*allocation);
    }
  }
  return info;
}

MethodInfo describe_method(const Program& program, size_t method_index) {
  const fb::ExecutionPlan& plan = program.method(method_index);
  MethodInfo info;
  info.name = plan.name()->str();
  for (int32_t index : *plan.inputs()) info.inputs.push_back(describe_value(plan, index));
  for (int32_t index : *plan.outputs()) info.outputs.push_back(describe_value(plan, index));
  for (const fb::BackendDelegate* delegate : *plan.delegates()) info.delegates.push_back(delegate->id()->str());
  const auto* sizes = plan.non_const_buffer_sizes();
  for (uint32_t i = 0; i < sizes->size(); ++i) info.memory_plan.push_back(element(sizes, i));

  std::vector<bool> operator_used(plan.operators() ? plan.operators()->size() : 0, false);
  for (const fb::Chain* chain : *plan.chains()) {
    for (const fb::Instruction* instruction : *chain->instructions()) {
      const std::string kind = instruction_kind(instruction->instr_args_type());
      auto entry = std::find_if(info.instructions.begin(), info.instructions.end(),
                                [&](const auto& pair) { return pair.first == kind; });
      if (entry == info.instructions.end()) {
        info.instructions.emplace_back(kind, 1);
      } else {
        ++entry->second;
      }
      if (const fb::KernelCall* call = instruction->instr_args_as_KernelCall()) {
        const auto op = static_cast<size_t>(call->op_index());
        if (!operator_used[op]) {
          operator_used[op] = true;
          add_unique(info.operators, operator_key(*plan.operators()->Get(static_cast<uint32_t>(op))));
        }
      }
    }
  }
  for (size_t op = 0; op < operator_used.size(); ++op) {
    if (!operator_used[op]) add_unique(info.operators, operator_key(*plan.operators()->Get(static_cast<uint32_t>(op))));
  }

  for (uint32_t i = 0; i < plan.values()->size(); ++i) {
    const fb::Tensor* tensor = plan.values()->Get(i)->val_as_Tensor();
    if (!tensor || !tensor->allocation_info() || tensor->allocation_info()->memory_id() != 2) continue;
    StateTensorInfo entry;
    entry.value = i;
    entry.dtype = std::string(dtype_name(static_cast<ScalarType>(tensor->scalar_type())));
    for (int32_t dim : *tensor->sizes()) entry.shape.push_back(dim);
    entry.offset = planned_offset(*tensor->allocation_info());
    entry.nbytes = tensor_nbytes(*tensor).value_or(0);
    if (const auto* extra = tensor->extra_tensor_info()) {
      if (extra->fully_qualified_name()) entry.name = extra->fully_qualified_name()->str();
    }
    info.state.push_back(std::move(entry));
  }
  std::stable_sort(info.state.begin(), info.state.end(),
                   [](const StateTensorInfo& a, const StateTensorInfo& b) { return a.offset < b.offset; });

  info.constant_bytes = method_constant_bytes(program, method_index);
  return info;
}

uint64_t method_constant_bytes(const Program& program, size_t method_index) {
  return constant_bytes_read(program, {method_index});
}

uint64_t constant_bytes_read(const Program& program, const std::vector<size_t>& method_indices) {
  std::set<uint32_t> constants;  // buffer indices are program-wide
  uint64_t bytes = 0;
  for (size_t method_index : method_indices) {
    for (const fb::EValue* value : *program.method(method_index).values()) {
      const fb::Tensor* tensor = value->val_as_Tensor();
      if (!tensor || tensor->allocation_info() || tensor->data_buffer_idx() == 0) continue;
      if (constants.insert(tensor->data_buffer_idx()).second) bytes += tensor_nbytes(*tensor).value_or(0);
    }
  }
  return bytes;
}

ProgramInfo describe_program(const Program& program) {
  ProgramInfo info;
  info.identifier = "ET12";
  info.extended_header = program.extended_header();
  const fb::Program& root = program.root();
  info.segments = root.segments() ? root.segments()->size() : 0;
  info.named_data_keys = root.named_data() ? root.named_data()->size() : 0;
  const fb::SubsegmentOffsets* constant_segment = root.constant_segment();
  if (constant_segment && constant_segment->offsets() && constant_segment->offsets()->size() > 0) {
    info.constants = constant_segment->offsets()->size() - 1;
    if (info.constants > 0) {
      if (auto segment = program.segment(constant_segment->segment_index())) info.constant_bytes = segment->size;
    }
  } else if (const auto* buffers = root.constant_buffer()) {
    info.constants = buffers->size() > 0 ? buffers->size() - 1 : 0;
    for (const fb::Buffer* buffer : *buffers) info.constant_bytes += buffer->storage() ? buffer->storage()->size() : 0;
  }
  for (size_t m = 0; m < program.method_count(); ++m) {
    const fb::ExecutionPlan& plan = program.method(m);
    for (const fb::BackendDelegate* delegate : *plan.delegates()) {
      DelegateInfo entry;
      entry.id = delegate->id()->str();
      entry.location = delegate->processed()->location() == fb::DataLocation::INLINE ? "inline" : "segment";
      entry.bytes = program.delegate_payload(*delegate).size;
      info.delegates.push_back(std::move(entry));
    }
    info.methods.push_back(describe_method(program, m));
  }
  return info;
}

}  // namespace etna
