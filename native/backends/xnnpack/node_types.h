// Everything etna knows about each XNNPACK node type, one row per type:
// wire code, name, engine, arity, flags, datatype rule, payload reader, shape
// rule, and the function that defines it in an XNNPACK subgraph or runs it
// as an etna kernel. Parsing, checks, shape inference, stage building and
// execution look a node's row up; adding a node type means adding its row
// (node_types.cpp) and the functions the row names.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/xnn_library.h"
#include "core/status.h"

namespace etna::xnn {

enum class Engine : uint8_t {
  kSubgraph,        // an XNNPACK subgraph node (xnn_define_*)
  kPackedOperator,  // an XNNPACK operator whose packed weights the module shares
  kEtnaKernel,      // etna's own C++ code: the linked XNNPACK has no such node
};

// Which datatypes a node accepts (graph_checks.cpp applies the rule).
enum class DatatypeRule : uint8_t {
  kFloat,          // every input and output fp32
  kFloatOrQ8,      // all fp32, or all the same 8-bit quantized type
  kFloatOrQs8,     // all fp32, or all qint8
  kMovable,        // any datatype XNNPACK moves, all alike and quantized alike
  kFloatSlope,     // kFloat, and input 1 (the slope) is a constant
  kConversion,     // fp32 to or from fp16, qint8 or quint8
  kWeights,        // input/filter/bias of FC and convolution, per-channel filters allowed
  kTensorWeights,  // the same with per-tensor filters only
  kUnsupported,    // rejected with the row's `unsupported` reason
};

class NodeReader;  // payload.h

// The arguments of a row's subgraph define function: the node, the stage's
// subgraph and the XNNPACK ids of the node's inputs and outputs.
struct DefineCall {
  const Node& node;
  xnn_subgraph_t subgraph;
  const std::vector<uint32_t>& in;
  const std::vector<uint32_t>& out;
};

// The arguments of a row's etna kernel: `data[v]` is the buffer of value v,
// sized for `shapes[v]` (checked by infer_shapes(), so kernels only index
// within them); element_size is that of the node's output datatype.
struct EtnaKernelCall {
  const Node& node;
  const std::vector<Shape>& shapes;
  void* const* data;
  size_t element_size;
  const Graph& graph;  // the node's values (datatypes, quantization)
  // The call's thread pool, which large kernels split their work over
  // (parallel.h); null runs everything on the calling thread.
  pthreadpool_t threadpool = nullptr;
};

// The arguments of a row's shape rule (shapes.cpp).
struct ShapeCall {
  const Graph& graph;
  const Node& node;
  std::vector<Shape>& shapes;  // fills shapes[output]
  bool at_declared;            // inputs hold their declared shapes (the init pass)
};

struct NodeTypeInfo {
  NodeType type;
  const char* name;  // the schema's NodeUnion name, "XNNConv2d"
  Engine engine;
  int8_t inputs;          // exact input count; -1 when not checked
  int8_t outputs;         // exact output count; -1 when not checked
  int64_t allowed_flags;  // flag bits the node may set; -1 for any
  DatatypeRule datatypes;
  const char* unsupported;  // why the node is rejected (DatatypeRule::kUnsupported)
  // The serialized table (XNode union member) into `node`.
  Status (*read)(const void* table, NodeReader& reader, Node& node);
  // Output shapes from input shapes; nullptr when the node has no rule.
  Status (*shape)(ShapeCall& call);
  // kSubgraph: the xnn_define_* call and its name (for messages).
  xnn_status (*define)(const DefineCall& call);
  const char* define_name;
  // kEtnaKernel: runs the node.
  Status (*run)(const EtnaKernelCall& call);
  // A node of another engine runs as the etna kernel `run` when this holds
  // (Convert to qdint8, which the linked XNNPACK lacks); nullptr for never.
  bool (*etna_kernel_when)(const Graph& graph, const Node& node);
  // fp32 nodes whose XNNPACK kernels turn NaN into a bound: the kernel the
  // delegate's NaN-keeping variant runs instead (nan_keeping_kernels.h);
  // nullptr when XNNPACK's kernel keeps NaN or the node is not a subgraph node.
  Status (*run_keeping_nan)(const EtnaKernelCall& call) = nullptr;
  // An etna kernel that can make NaN from numbers (the square root, reciprocal
  // square root or log of a negative): the fast variant checks its output,
  // since a later XNNPACK clamp would turn that NaN into a number.
  bool may_make_nan = false;
};

// The row of a valid NodeType.
const NodeTypeInfo& node_type_info(NodeType type);

// The engine of the type's row.
Engine engine_for(NodeType type);
// Whether XNNPACK runs the type as an elementwise operator (unary, binary with
// broadcasting, clamp, convert): what decides a stage's threads (delegate.cpp).
bool is_elementwise(NodeType type);
// The engine this node runs on (its row's, unless the row's etna_kernel_when holds).
Engine engine_for(const Graph& graph, const Node& node);

// Whether a call's NaN and infinities must take the delegate's NaN-keeping
// variant: the fast one gives XNNPACK's result, which loses NaN.
enum class NanHandling : uint8_t {
  kFast,     // XNNPACK's kernels throughout
  kKeepNan,  // fp32 nodes that lose NaN run as etna kernels or checked packed operators
};

// The etna kernel an fp32 node runs as under NanHandling::kKeepNan, or nullptr
// when it runs as under kFast.
Status (*nan_keeping_kernel_for(const Graph& graph, const Node& node))(const EtnaKernelCall&);
// The engine of the node under `handling`.
Engine engine_for(const Graph& graph, const Node& node, NanHandling handling);

}  // namespace etna::xnn
