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

}  // namespace etna::xnn
