// A plain description of a Program for `etna inspect` and method metadata:
// what each method takes and returns, which operators and delegates it uses,
// and its memory plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "program.h"

namespace etna {

struct ValueInfo {
  std::string name;  // from the method's pytree spec, or input_<i> / output_<i>
  std::string kind;  // "tensor", "int", "double", "bool", "string", "none", "int_list", ...
  // Tensor fields (kind == "tensor").
  std::string dtype;
  std::vector<int64_t> shape;
  std::string dynamism;  // "static", "bound", "unbound"
  bool planned = false;
  // arena placement of a tensor, when planned in an arena
  std::optional<uint32_t> memory_id;
  uint64_t memory_offset = 0;
  uint64_t nbytes = 0;
};

// A tensor placed in the state arena (mem_id 2).
struct StateTensorInfo {
  uint32_t value = 0;  // index in the method's values
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  std::string name;  // fully qualified name, when the file has one
};

struct DelegateInfo {
  std::string id;
  std::string location;  // "inline" or "segment"
  uint64_t bytes = 0;
};

struct MethodInfo {
  std::string name;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<std::string> operators;                          // "name.overload", first use first, no duplicates
  std::vector<std::string> delegates;                          // backend ids, in table order
  std::vector<std::pair<std::string, uint64_t>> instructions;  // kind -> count, kinds that occur
  std::vector<int64_t> memory_plan;                            // non_const_buffer_sizes as stored
  uint64_t constant_bytes = 0;                                 // distinct constants this method reads
  std::vector<StateTensorInfo> state;                          // tensors at mem_id 2, by offset
};

struct ProgramInfo {
  std::string identifier;
  std::optional<ExtendedHeader> extended_header;
  uint64_t segments = 0;
  uint64_t named_data_keys = 0;
  uint64_t constants = 0;               // constant tensors stored in the file (the reserved entry 0 not counted)
  uint64_t constant_bytes = 0;          // bytes the constant storage occupies
  std::vector<DelegateInfo> delegates;  // every delegate entry of every method
  std::vector<MethodInfo> methods;
};

// Names for the `count` leaves of a PyTorch pytree spec (ContainerMetadata's
// encoded_inp_str / encoded_out_str): a leaf under dict keys is named by them,
// joined with '.'; any other leaf is `<prefix>_<index>`. A spec that does not
// parse, has another leaf count, or would repeat a name gives the default name
// for every leaf. Never fails: the text comes from the file.
std::vector<std::string> pytree_leaf_names(std::string_view spec, size_t count, std::string_view prefix);

ValueInfo describe_value(const fb::ExecutionPlan& plan, int32_t index);
MethodInfo describe_method(const Program& program, size_t method_index);
// Bytes of the distinct constant buffers a method reads (MethodInfo::constant_bytes).
uint64_t method_constant_bytes(const Program& program, size_t method_index);
// Bytes of the distinct constant buffers any of these methods reads, each counted once.
uint64_t constant_bytes_read(const Program& program, const std::vector<size_t>& method_indices);
ProgramInfo describe_program(const Program& program);

}  // namespace etna
