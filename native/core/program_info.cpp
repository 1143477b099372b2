#include "program_info.h"

#include <algorithm>
#include <set>
#include <string_view>

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

// ---------------------------------------------------------------- pytree specs

// A parsed JSON value, as much of JSON as pytree specs use.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  std::string text;               // kString: decoded text; kNumber, kBool: the literal
  std::vector<Json> items;        // kArray items; kObject values
  std::vector<std::string> keys;  // kObject keys, parallel to items

  const Json* member(std::string_view key) const {
    if (kind != Kind::kObject) return nullptr;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &items[i];
    }
    return nullptr;
  }
};

// Strict JSON (RFC 8259). Nesting is limited so that hostile text cannot
// exhaust the stack; every read checks the end of the text first.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  std::optional<Json> document() {
    Json value;
    if (!read(value, 0)) return std::nullopt;
    skip_space();
    if (pos_ != text_.size()) return std::nullopt;
    return value;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool at_end() const { return pos_ >= text_.size(); }

  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skip_space();
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool read(Json& out, int depth) {
    if (depth > kMaxDepth) return false;
    skip_space();
    if (at_end()) return false;
    switch (text_[pos_]) {
      case '{': return read_object(out, depth);
      case '[': return read_array(out, depth);
      case '"': out.kind = Json::Kind::kString; return read_string(out.text);
      case 'n': out.kind = Json::Kind::kNull; return literal("null");
      case 't':
        out.kind = Json::Kind::kBool;
        out.text = "true";
        return literal("true");
      case 'f':
        out.kind = Json::Kind::kBool;
        out.text = "false";
        return literal("false");
      default: out.kind = Json::Kind::kNumber; return read_number(out.text);
    }
  }

  bool read_array(Json& out, int depth) {
    out.kind = Json::Kind::kArray;
    ++pos_;
    if (consume(']')) return true;
    do {
      out.items.emplace_back();
      if (!read(out.items.back(), depth + 1)) return false;
    } while (consume(','));
    return consume(']');
  }

  bool read_object(Json& out, int depth) {
    out.kind = Json::Kind::kObject;
    ++pos_;
    if (consume('}')) return true;
    do {
      skip_space();
      std::string key;
      if (at_end() || text_[pos_] != '"' || !read_string(key) || !consume(':')) return false;
      out.keys.push_back(std::move(key));
      out.items.emplace_back();
      if (!read(out.items.back(), depth + 1)) return false;
    } while (consume(','));
    return consume('}');
  }

  bool digits() {
    const size_t from = pos_;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > from;
  }

  bool read_number(std::string& out) {
    const size_t start = pos_;
    if (!at_end() && text_[pos_] == '-') ++pos_;
    if (!digits()) return false;
    if (!at_end() && text_[pos_] == '.') {
      ++pos_;
      if (!digits()) return false;
    }
    if (!at_end() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!at_end() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) return false;
    }
    out.assign(text_.substr(start, pos_ - start));
    return true;
  }

  bool hex4(uint32_t& out) {
    if (text_.size() - pos_ < 4) return false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }

  static void append_utf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  // \uXXXX, with a surrogate pair read as one code point (Python's json.dumps
  // escapes every non-ASCII character this way).
  bool read_escaped_code(std::string& out) {
    uint32_t code = 0;
    if (!hex4(code) || (code >= 0xDC00 && code <= 0xDFFF)) return false;
    if (code >= 0xD800 && code <= 0xDBFF) {
      uint32_t low = 0;
      if (!literal("\\u") || !hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, code);
    return true;
  }

  bool read_string(std::string& out) {
    ++pos_;
    while (!at_end()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (at_end()) return false;
      switch (text_[pos_++]) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u':
          if (!read_escaped_code(out)) return false;
          break;
        default: return false;
      }
    }
    return false;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Node types whose context is the JSON text of their keys, one per child.
bool keyed_node(std::string_view type) { return type == "builtins.dict" || type == "collections.OrderedDict"; }

// Appends the dict-key path of every leaf under `spec` ("" for a leaf under no
// dict) to `leaves`; false for anything that is not a well-formed spec or has
// more than `limit` leaves.
bool collect_leaf_paths(const Json& spec, const std::string& path, size_t limit, std::vector<std::string>& leaves) {
  const Json* type = spec.member("type");
  const Json* children = spec.member("children_spec");
  if (type == nullptr || children == nullptr || children->kind != Json::Kind::kArray) return false;
  if (type->kind == Json::Kind::kNull) {
    if (!children->items.empty() || leaves.size() >= limit) return false;
    leaves.push_back(path);
    return true;
  }
  if (type->kind != Json::Kind::kString) return false;
  std::vector<std::string> keys;
  if (keyed_node(type->text)) {
    const Json* context = spec.member("context");
    if (context == nullptr || context->kind != Json::Kind::kString) return false;
    std::optional<Json> parsed = JsonReader(context->text).document();
    if (!parsed || parsed->kind != Json::Kind::kArray || parsed->items.size() != children->items.size()) return false;
    for (Json& key : parsed->items) {
      if (key.kind != Json::Kind::kString || key.text.empty()) return false;
      keys.push_back(path.empty() ? std::move(key.text) : path + "." + key.text);
    }
  }
  for (size_t i = 0; i < children->items.size(); ++i) {
    if (!collect_leaf_paths(children->items[i], keys.empty() ? path : keys[i], limit, leaves)) return false;
  }
  return true;
}

std::string_view string_view_of(const flatbuffers::String* text) {
  return text == nullptr ? std::string_view() : std::string_view(text->c_str(), text->size());
}

void assign_names(std::vector<ValueInfo>& values, const std::vector<std::string>& names) {
  for (size_t i = 0; i < values.size(); ++i) values[i].name = names[i];
}

}  // namespace

std::vector<std::string> pytree_leaf_names(std::string_view spec, size_t count, std::string_view prefix) {
  std::vector<std::string> defaults;
  for (size_t i = 0; i < count; ++i) defaults.push_back(std::string(prefix) + "_" + std::to_string(i));
  // Protocol 1 (the only one PyTorch writes): [1, <spec>].
  std::optional<Json> document = JsonReader(spec).document();
  if (!document || document->kind != Json::Kind::kArray || document->items.size() != 2) return defaults;
  if (document->items[0].kind != Json::Kind::kNumber || document->items[0].text != "1") return defaults;
  std::vector<std::string> paths;
  if (!collect_leaf_paths(document->items[1], "", count, paths) || paths.size() != count) return defaults;
  std::vector<std::string> names = defaults;
  std::set<std::string> seen;
  for (size_t i = 0; i < count; ++i) {
    if (!paths[i].empty()) names[i] = std::move(paths[i]);
    if (!seen.insert(names[i]).second) return defaults;
  }
  return names;
}

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
  const fb::ContainerMetadata* container = plan.container_meta_type();
  assign_names(info.inputs, pytree_leaf_names(container ? string_view_of(container->encoded_inp_str()) : "",
                                              info.inputs.size(), "input"));
  assign_names(info.outputs, pytree_leaf_names(container ? string_view_of(container->encoded_out_str()) : "",
                                               info.outputs.size(), "output"));
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
