#include "backends/xnnpack/rewrites.h"

#include <algorithm>

#include "backends/xnnpack/node_types.h"

namespace etna::xnn {

std::vector<bool> fold_transposes_into_matmuls(Graph& graph) {
  std::vector<bool> folded(graph.nodes.size(), false);
  for (Node& matmul : graph.nodes) {
    if (matmul.type != NodeType::kBatchMatrixMultiply || engine_for(graph, matmul) != Engine::kEtnaKernel) continue;
    Value& operand = graph.values[matmul.inputs[1]];
    if (operand.producer < 0 || operand.is_output || operand.consumers.size() != 1) continue;
    const Node& transpose = graph.nodes[static_cast<size_t>(operand.producer)];
    if (transpose.type != NodeType::kStaticTranspose || operand.datatype != Datatype::fp32) continue;
    const size_t rank = transpose.perm.size();
    if (rank < 2) continue;
    if (transpose.perm[rank - 1] != rank - 1 && transpose.perm[rank - 2] != rank - 1) continue;
    Value& source = graph.values[transpose.inputs[0]];
    if (source.datatype != Datatype::fp32) continue;
    matmul.b_perm = transpose.perm;
    matmul.inputs[1] = transpose.inputs[0];
    source.consumers.insert(std::upper_bound(source.consumers.begin(), source.consumers.end(), matmul.index),
                            static_cast<uint32_t>(matmul.index));
    operand.consumers.clear();
    operand.producer = -1;
    folded[transpose.index] = true;
  }
  return folded;
}

void compute_16bit_externals_in_fp32(Graph& graph) {
  const size_t count = graph.values.size();
  // Values a Convert reads or writes, and values a data movement node moves
  // (which takes fp16 as it is).
  std::vector<bool> converted(count, false);
  std::vector<bool> moved(count, false);
  for (const Node& node : graph.nodes) {
    const DatatypeRule rule = node_type_info(node.type).datatypes;
    if (rule != DatatypeRule::kConversion && rule != DatatypeRule::kMovable) continue;
    std::vector<bool>& marks = rule == DatatypeRule::kConversion ? converted : moved;
    for (uint32_t index : node.inputs) {
      if (index < count) marks[index] = true;
    }
    for (uint32_t index : node.outputs) {
      if (index < count) marks[index] = true;
    }
  }
  for (size_t v = 0; v < count; ++v) {
    Value& value = graph.values[v];
    const bool sixteen_bit = value.datatype == Datatype::bf16 || value.datatype == Datatype::fp16;
    if (!sixteen_bit || value.is_constant || !(value.is_input || value.is_output)) continue;
    const bool taken_as_is = converted[v] || (value.datatype == Datatype::fp16 && moved[v]);
    if (taken_as_is || value.quant.kind != Quantization::Kind::kNone) continue;
    value.argument_datatype = value.datatype;
    value.datatype = Datatype::fp32;
  }
}

}  // namespace etna::xnn
