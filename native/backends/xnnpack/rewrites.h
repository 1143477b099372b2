// Rewrites of a checked graph that the delegate makes before it builds its
// stages: each changes which nodes run, never what the graph computes.
#pragma once

#include <vector>

#include "backends/xnnpack/graph.h"

namespace etna::xnn {

// A transpose whose only reader is the B input of etna's batch matrix
// multiply, and which keeps its input's innermost dim among the two matrix
// dims, is not run: the multiply reads the transpose's input through the
// permutation (rows of a [positions, heads * head_dim] cache, one head at a
// time) instead of a materialised copy. Returns the nodes folded away; their
// outputs are left without producer or readers.
std::vector<bool> fold_transposes_into_matmuls(Graph& graph);

}  // namespace etna::xnn
