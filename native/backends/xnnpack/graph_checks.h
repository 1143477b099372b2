// Semantic checks of a parsed graph, done once at init so that nothing
// unsupported is discovered at execute: dataflow (every input defined before
// use, every output produced once), and the arity, flags and datatypes each
// node's row in node_types.cpp asks for.
#pragma once

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/node_types.h"
#include "core/status.h"

namespace etna::xnn {

// Fills producer/consumers and rejects anything the delegate cannot run,
// naming the node, its type and the offending value or datatype.
Status check_graph(Graph& graph);

// True for datatypes carrying per-tensor quantization parameters.
bool is_quantized(Datatype type);

}  // namespace etna::xnn
