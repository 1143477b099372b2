// Semantic checks of a verified FlatBuffer: every index, offset, size and
// enum that execution follows is proven in range here, once, at load.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "dtype.h"
#include "program.h"
#include "program_checks.h"

namespace etna {
namespace {

constexpr size_t kMaxRank = 16;

std::string num(uint64_t v) { return std::to_string(v); }
std::string num(int64_t v) { return std::to_string(v); }
std::string num(int32_t v) { return std::to_string(v); }
std::string num(uint32_t v) { return std::to_string(v); }

const char* kind_name(fb::KernelTypes type) {
  switch (type) {
    case fb::KernelTypes::NullValue: return "Null";
    case fb::KernelTypes::IntValue: return "Int";
    case fb::KernelTypes::BoolValue: return "Bool";
    case fb::KernelTypes::DoubleValue: return "Double";
    case fb::KernelTypes::Tensor: return "Tensor";
    case fb::KernelTypes::StringValue: return "String";
    case fb::KernelTypes::IntList: return "IntList";
    case fb::KernelTypes::DoubleList: return "DoubleList";
    case fb::KernelTypes::BoolList: return "BoolList";
    case fb::KernelTypes::TensorList: return "TensorList";
    case fb::KernelTypes::OptionalTensorList: return "OptionalTensorList";
    default: return "unknown";
  }
}

class Checker {
 public:
  explicit Checker(const Program& program) : program_(program), root_(program.root()) {}

  Status run() {
    ETNA_TRY(check_constants());
    ETNA_TRY(check_mutable_segments());
    ETNA_TRY(check_named_data());
    for (size_t i = 0; i < program_.method_count(); ++i) ETNA_TRY(check_method(i));
    return Status::ok();
  }

 private:
  static Error fail(std::string message) { return make_error(ErrorCode::kInvalidProgram, std::move(message)); }

  Status check_constants() {
    const fb::SubsegmentOffsets* segment = root_.constant_segment();
    if (!segment || !segment->offsets() || segment->offsets()->size() <= 1) return Status::ok();
    if (root_.constant_buffer() && root_.constant_buffer()->size() > 0) {
      return fail("constant_segment has " + num(segment->offsets()->size()) +
                  " offsets but constant_buffer is not "
                  "empty (" +
                  num(root_.constant_buffer()->size()) + " entries); a program uses one or the other");
    }
    auto bytes = program_.segment(segment->segment_index());
    if (!bytes) {
      return fail("constant_segment.segment_index " + num(segment->segment_index()) + " does not name a segment with " +
                  "data (segments: " + num(root_.segments() ? root_.segments()->size() : 0u) + ")");
    }
    return check_offsets(*segment, *bytes, "constant_segment");
  }

  // Every offset of `entry` (named `table`) lies within its segment's bytes.
  static Status check_offsets(const fb::SubsegmentOffsets& entry, ByteSpan bytes, const std::string& table) {
    if (!entry.offsets()) return Status::ok();
    for (flatbuffers::uoffset_t i = 0; i < entry.offsets()->size(); ++i) {
      if (element(entry.offsets(), i) > bytes.size) {
        return fail(table + ".offsets[" + num(i) + "] = " + num(element(entry.offsets(), i)) +
                    " is past the end of its " + num(uint64_t{bytes.size}) + "-byte segment");
      }
    }
    return Status::ok();
  }

  Status check_mutable_segments() {
    const auto* entries = root_.mutable_data_segments();
    if (!entries) return Status::ok();
    for (flatbuffers::uoffset_t j = 0; j < entries->size(); ++j) {
      const fb::SubsegmentOffsets* entry = entries->Get(j);
      auto bytes = program_.segment(entry->segment_index());
      if (!bytes) {
        return fail("mutable_data_segments[" + num(j) + "].segment_index " + num(entry->segment_index()) +
                    " does not name a segment with data");
      }
      ETNA_TRY(check_offsets(*entry, *bytes, "mutable_data_segments[" + num(j) + "]"));
    }
    return Status::ok();
  }

  Status check_named_data() {
    const auto* entries = root_.named_data();
    if (!entries) return Status::ok();
    for (flatbuffers::uoffset_t i = 0; i < entries->size(); ++i) {
      const fb::NamedData* entry = entries->Get(i);
      if (!entry->key()) return fail("named_data[" + num(i) + "] has no key");
      if (!program_.segment(entry->segment_index())) {
        return fail("named_data[" + num(i) + "] ('" + entry->key()->str() + "'): segment_index " +
                    num(entry->segment_index()) + " does not name a segment with data");
      }
    }
    return Status::ok();
  }

  // ---- one method -------------------------------------------------------

  Status check_method(size_t index) {
    const fb::ExecutionPlan& plan = program_.method(index);
    where_ = "execution_plan[" + std::to_string(index) + "]";
    if (!plan.name()) return fail(where_ + ": method has no name");
    where_ = "method '" + plan.name()->str() + "'";
    if (!plan.values()) return fail(where_ + ": values table is missing");
    if (!plan.inputs()) return fail(where_ + ": inputs list is missing");
    if (!plan.outputs()) return fail(where_ + ": outputs list is missing");
    if (!plan.chains() || plan.chains()->size() == 0) return fail(where_ + ": has no instruction chain");
    if (!plan.non_const_buffer_sizes()) return fail(where_ + ": non_const_buffer_sizes is missing");
    if (!plan.delegates()) return fail(where_ + ": delegates table is missing");
    plan_ = &plan;
    value_count_ = plan.values()->size();

    const auto* sizes = plan.non_const_buffer_sizes();
    for (flatbuffers::uoffset_t i = 1; i < sizes->size(); ++i) {
      if (element(sizes, i) < 0) {
        return fail(where_ + ": non_const_buffer_sizes[" + num(i) + "] = " + num(element(sizes, i)) + " is negative");
      }
    }
    if (const auto* devices = plan.non_const_buffer_device()) {
      for (flatbuffers::uoffset_t i = 0; i < devices->size(); ++i) {
        const int32_t buffer = devices->Get(i)->buffer_idx();
        if (buffer < 1 || static_cast<uint32_t>(buffer) >= sizes->size()) {
          return fail(where_ + ": non_const_buffer_device[" + num(i) + "].buffer_idx " + num(buffer) +
                      " does not name an arena (non_const_buffer_sizes has " + num(sizes->size()) + " entries)");
        }
      }
    }
    for (flatbuffers::uoffset_t i = 0; i < value_count_; ++i) ETNA_TRY(check_value(i));
    for (flatbuffers::uoffset_t i = 0; i < plan.inputs()->size(); ++i) {
      ETNA_TRY(check_index("inputs[" + num(i) + "]", plan.inputs()->Get(i)));
    }
    for (flatbuffers::uoffset_t i = 0; i < plan.outputs()->size(); ++i) {
      ETNA_TRY(check_index("outputs[" + num(i) + "]", plan.outputs()->Get(i)));
    }
    if (const auto* ops = plan.operators()) {
      for (flatbuffers::uoffset_t i = 0; i < ops->size(); ++i) {
        if (!ops->Get(i)->name()) return fail(where_ + ": operators[" + num(i) + "] has no name");
      }
    }
    for (flatbuffers::uoffset_t i = 0; i < plan.delegates()->size(); ++i) ETNA_TRY(check_delegate(i));
    for (flatbuffers::uoffset_t c = 0; c < plan.chains()->size(); ++c) ETNA_TRY(check_chain(c));
    return Status::ok();
  }

  Status check_index(const std::string& what, int64_t index) const {
    if (index < 0 || static_cast<uint64_t>(index) >= value_count_) {
      return fail(where_ + ": " + what + " = " + num(index) + " is not a value index (values has " + num(value_count_) +
                  " entries)");
    }
    return Status::ok();
  }

  fb::KernelTypes kind_of(int64_t index) const {
    return plan_->values()->Get(static_cast<uint32_t>(index))->val_type();
  }

  Status check_index_of(const std::string& what, int64_t index, std::initializer_list<fb::KernelTypes> kinds) const {
    ETNA_TRY(check_index(what, index));
    const fb::KernelTypes actual = kind_of(index);
    if (std::find(kinds.begin(), kinds.end(), actual) == kinds.end()) {
      return fail(where_ + ": " + what + " = " + num(index) + " refers to a " + kind_name(actual) +
                  " value, expected " + kind_name(*kinds.begin()));
    }
    return Status::ok();
  }

  Status check_value(flatbuffers::uoffset_t i) {
    const fb::EValue* value = plan_->values()->Get(i);
    const std::string at = "values[" + num(i) + "]";
    const auto type = value->val_type();
    if (type == fb::KernelTypes::NONE || static_cast<uint8_t>(type) > static_cast<uint8_t>(fb::KernelTypes::MAX)) {
      return fail(where_ + ": " + at + " has unknown kind tag " + num(uint32_t{static_cast<uint8_t>(type)}));
    }
    if (value->val() == nullptr) return fail(where_ + ": " + at + " (" + kind_name(type) + ") has no payload");
    switch (type) {
      case fb::KernelTypes::Tensor: return check_tensor(at, *value->val_as_Tensor());
      case fb::KernelTypes::StringValue:
        if (!value->val_as_StringValue()->string_val()) return fail(where_ + ": " + at + " (String) has no text");
        return Status::ok();
      case fb::KernelTypes::IntList: {
        const auto* items = value->val_as_IntList()->items();
        if (!items) return fail(where_ + ": " + at + " (IntList) has no items");
        for (flatbuffers::uoffset_t k = 0; k < items->size(); ++k) {
          ETNA_TRY(check_index_of(at + ".items[" + num(k) + "]", element(items, k), {fb::KernelTypes::IntValue}));
        }
        return Status::ok();
      }
      case fb::KernelTypes::DoubleList:
        if (!value->val_as_DoubleList()->items()) return fail(where_ + ": " + at + " (DoubleList) has no items");
        return Status::ok();
      case fb::KernelTypes::BoolList:
        if (!value->val_as_BoolList()->items()) return fail(where_ + ": " + at + " (BoolList) has no items");
        return Status::ok();
      case fb::KernelTypes::TensorList: {
        const auto* items = value->val_as_TensorList()->items();
        if (!items) return fail(where_ + ": " + at + " (TensorList) has no items");
        for (flatbuffers::uoffset_t k = 0; k < items->size(); ++k) {
          ETNA_TRY(check_index_of(at + ".items[" + num(k) + "]", items->Get(k), {fb::KernelTypes::Tensor}));
        }
        return Status::ok();
      }
      case fb::KernelTypes::OptionalTensorList: {
        const auto* items = value->val_as_OptionalTensorList()->items();
        if (!items) return fail(where_ + ": " + at + " (OptionalTensorList) has no items");
        for (flatbuffers::uoffset_t k = 0; k < items->size(); ++k) {
          if (items->Get(k) == -1) continue;
          ETNA_TRY(check_index_of(at + ".items[" + num(k) + "]", items->Get(k),
                                  {fb::KernelTypes::Tensor, fb::KernelTypes::NullValue}));
        }
        return Status::ok();
      }
      default: return Status::ok();
    }
  }

  Status check_tensor(const std::string& at, const fb::Tensor& tensor) {
    const std::string t = where_ + ": " + at + " (Tensor)";
    const int code = static_cast<int>(tensor.scalar_type());
    if (!element_size(code)) return fail(t + ": unknown scalar_type " + num(int32_t{code}));
    if (tensor.storage_offset() != 0) {
      return fail(t + ": storage_offset " + num(tensor.storage_offset()) + " is not 0");
    }
    if (!tensor.sizes() || !tensor.dim_order()) return fail(t + ": sizes or dim_order is missing");
    const size_t rank = tensor.sizes()->size();
    if (rank > kMaxRank) return fail(t + ": rank " + num(uint64_t{rank}) + " exceeds 16");
    if (tensor.dim_order()->size() != rank) {
      return fail(t + ": dim_order has " + num(uint64_t{tensor.dim_order()->size()}) + " entries for rank " +
                  num(uint64_t{rank}));
    }
    uint32_t seen = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int32_t size = tensor.sizes()->Get(static_cast<uint32_t>(d));
      if (size < 0) return fail(t + ": sizes[" + num(uint64_t{d}) + "] = " + num(size) + " is negative");
      const uint8_t dim = tensor.dim_order()->Get(static_cast<uint32_t>(d));
      if (dim >= rank || (seen & (1u << dim)) != 0) {
        return fail(t + ": dim_order is not a permutation of 0.." + num(uint64_t{rank}) + "-1");
      }
      seen |= 1u << dim;
    }
    const auto dynamism = static_cast<int>(tensor.shape_dynamism());
    if (dynamism < 0 || dynamism > 2) return fail(t + ": unknown shape_dynamism " + num(int32_t{dynamism}));
    auto nbytes = tensor_nbytes(tensor);
    if (!nbytes) return fail(t + ": byte size overflows");
    // Strides count a zero-sized dim as 1, so a tensor of no elements can
    // still have strides too large for int64.
    uint64_t stride_span = 1;
    for (int32_t size : *tensor.sizes()) {
      if (__builtin_mul_overflow(stride_span, static_cast<uint64_t>(size == 0 ? 1 : size), &stride_span) ||
          stride_span > static_cast<uint64_t>(INT64_MAX)) {
        return fail(t + ": strides overflow");
      }
    }

    const fb::ExtraTensorInfo* extra = tensor.extra_tensor_info();
    if (extra) {
      const auto location = static_cast<int>(extra->location());
      if (location < 0 || location > 1)
        return fail(t + ": unknown extra_tensor_info.location " + num(int32_t{location}));
      if (extra->location() == fb::TensorDataLocation::EXTERNAL && !extra->fully_qualified_name()) {
        return fail(t + ": external tensor has no fully_qualified_name");
      }
    }
    const bool external = extra && extra->location() == fb::TensorDataLocation::EXTERNAL;

    if (const fb::AllocationDetails* allocation = tensor.allocation_info()) {
      const auto* arenas = plan_->non_const_buffer_sizes();
      const uint32_t id = allocation->memory_id();
      if (id < 1 || id >= arenas->size()) {
        return fail(t + ": allocation_info.memory_id " + num(id) +
                    " does not name an arena (non_const_buffer_sizes has " + num(arenas->size()) + " entries)");
      }
      const uint64_t offset = planned_offset(*allocation);
      const uint64_t arena = static_cast<uint64_t>(element(arenas, id));
      if (offset > arena || *nbytes > arena - offset) {
        return fail(t + ": planned bytes [" + num(offset) + ", " + num(offset + *nbytes) + ") exceed arena " + num(id) +
                    " of " + num(arena) + " bytes");
      }
      if (tensor.data_buffer_idx() > 0 && !external) {
        auto initial = program_.mutable_initial_data(tensor.data_buffer_idx(), *nbytes);
        if (!initial) return fail(t + ": " + initial.error().message);
      }
    } else if (tensor.data_buffer_idx() > 0 && !external) {
      auto constant = program_.constant_data(tensor.data_buffer_idx(), *nbytes);
      if (!constant) return fail(t + ": " + constant.error().message);
    }
    return Status::ok();
  }

  Status check_delegate(flatbuffers::uoffset_t i) const {
    const fb::BackendDelegate* delegate = plan_->delegates()->Get(i);
    const std::string d = where_ + ": delegates[" + num(i) + "]";
    if (!delegate->id()) return fail(d + " has no backend id");
    const fb::BackendDelegateDataReference* ref = delegate->processed();
    if (!ref) return fail(d + " ('" + delegate->id()->str() + "') has no payload reference");
    if (ref->location() == fb::DataLocation::INLINE) {
      const auto* inline_data = root_.backend_delegate_data();
      if (!inline_data || ref->index() >= inline_data->size()) {
        return fail(d + ": inline payload index " + num(ref->index()) + " is out of range (backend_delegate_data has " +
                    num(inline_data ? inline_data->size() : 0u) + " entries)");
      }
    } else if (ref->location() == fb::DataLocation::SEGMENT) {
      if (!program_.segment(ref->index())) {
        return fail(d + ": payload segment " + num(ref->index()) + " does not name a segment with data");
      }
    } else {
      return fail(d + ": unknown payload location " + num(int32_t{static_cast<int8_t>(ref->location())}));
    }
    if (const auto* specs = delegate->compile_specs()) {
      for (flatbuffers::uoffset_t k = 0; k < specs->size(); ++k) {
        if (!specs->Get(k)->key() || !specs->Get(k)->value()) {
          return fail(d + ": compile_specs[" + num(k) + "] lacks a key or value");
        }
      }
    }
    return Status::ok();
  }

  Status check_args(const std::string& at, const flatbuffers::Vector<int32_t>* args) const {
    if (!args) return fail(where_ + ": " + at + " has no argument list");
    for (flatbuffers::uoffset_t k = 0; k < args->size(); ++k) {
      ETNA_TRY(check_index(at + ".args[" + num(k) + "]", args->Get(k)));
    }
    return Status::ok();
  }

  Status check_chain(flatbuffers::uoffset_t c) const {
    const fb::Chain* chain = plan_->chains()->Get(c);
    const auto* instructions = chain->instructions();
    if (!instructions) return fail(where_ + ": chains[" + num(c) + "] has no instruction list");
    const uint32_t count = instructions->size();
    const uint32_t operator_count = plan_->operators() ? plan_->operators()->size() : 0;
    for (uint32_t k = 0; k < count; ++k) {
      const fb::Instruction* instruction = instructions->Get(k);
      const std::string at = "chains[" + num(c) + "].instructions[" + num(k) + "]";
      if (!instruction->instr_args()) return fail(where_ + ": " + at + " has no arguments");
      switch (instruction->instr_args_type()) {
        case fb::InstructionArguments::KernelCall: {
          const fb::KernelCall* call = instruction->instr_args_as_KernelCall();
          if (call->op_index() < 0 || static_cast<uint32_t>(call->op_index()) >= operator_count) {
            return fail(where_ + ": " + at + " (KernelCall): op_index " + num(call->op_index()) +
                        " is out of range (operators has " + num(operator_count) + " entries)");
          }
          ETNA_TRY(check_args(at + " (KernelCall)", call->args()));
          break;
        }
        case fb::InstructionArguments::DelegateCall: {
          const fb::DelegateCall* call = instruction->instr_args_as_DelegateCall();
          if (call->delegate_index() < 0 ||
              static_cast<uint32_t>(call->delegate_index()) >= plan_->delegates()->size()) {
            return fail(where_ + ": " + at + " (DelegateCall): delegate_index " + num(call->delegate_index()) +
                        " is out of range (delegates has " + num(plan_->delegates()->size()) + " entries)");
          }
          ETNA_TRY(check_args(at + " (DelegateCall)", call->args()));
          break;
        }
        case fb::InstructionArguments::MoveCall: {
          const fb::MoveCall* call = instruction->instr_args_as_MoveCall();
          ETNA_TRY(check_index(at + " (MoveCall).move_from", call->move_from()));
          ETNA_TRY(check_index(at + " (MoveCall).move_to", call->move_to()));
          break;
        }
        case fb::InstructionArguments::JumpFalseCall: {
          const fb::JumpFalseCall* call = instruction->instr_args_as_JumpFalseCall();
          ETNA_TRY(check_index_of(at + " (JumpFalseCall).cond_value_index", call->cond_value_index(),
                                  {fb::KernelTypes::BoolValue, fb::KernelTypes::Tensor}));
          const int32_t target = call->destination_instruction();
          if (target < 0 || static_cast<uint32_t>(target) > count) {
            return fail(where_ + ": " + at + " (JumpFalseCall): destination_instruction " + num(target) +
                        " is outside the chain's " + num(count) + " instructions");
          }
          break;
        }
        case fb::InstructionArguments::FreeCall: {
          ETNA_TRY(check_index_of(at + " (FreeCall).value_index", instruction->instr_args_as_FreeCall()->value_index(),
                                  {fb::KernelTypes::Tensor}));
          break;
        }
        default:
          return fail(where_ + ": " + at + " has unknown instruction tag " +
                      num(uint32_t{static_cast<uint8_t>(instruction->instr_args_type())}));
      }
    }
    return Status::ok();
  }

  const Program& program_;
  const fb::Program& root_;
  const fb::ExecutionPlan* plan_ = nullptr;
  uint32_t value_count_ = 0;
  std::string where_;
};

}  // namespace

Status check_program(const Program& program) { return Checker(program).run(); }

}  // namespace etna
