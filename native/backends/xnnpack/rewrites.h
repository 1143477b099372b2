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

// The linked XNNPACK has no bf16 tensors and computes fp16 only in Convert.
// An external input or output declared bf16 or fp16 that other nodes read or
// write is computed in fp32 instead (its argument_datatype keeps the declared
// one), as the exporter's fp32 graph around the conversions would: the
// delegate widens the caller's tensor exactly on the way in and rounds to
// nearest even on the way out. fp16 values that a Convert or a data movement
// node takes as they are, quantized and constant values keep their datatype,
// for the checks to take or refuse (a bf16 Convert is refused by name).
void compute_16bit_externals_in_fp32(Graph& graph);

}  // namespace etna::xnn
