// Semantic checks of a parsed graph, done once at init so that nothing
// unsupported is discovered at execute: dataflow (every input defined before
// use, every output produced once), datatypes and arity of each node, and
// which engine runs each node on the linked (2022) XNNPACK.
#pragma once

#include "backends/xnnpack/graph.h"
#include "core/status.h"

namespace etna::xnn {

enum class Engine : uint8_t {
  kSubgraph,        // an XNNPACK subgraph node (xnn_define_*)
  kPackedOperator,  // an XNNPACK operator whose packed weights the module shares
  kOwnKernel,       // etna's own C++ code: the linked XNNPACK has no such node
};

Engine engine_for(NodeType type);

// Fills producer/consumers and rejects anything the delegate cannot run,
// naming the node, its type and the offending value or datatype.
Status check_graph(Graph& graph);

// True for datatypes carrying per-tensor quantization parameters.
bool is_quantized(Datatype type);

}  // namespace etna::xnn
