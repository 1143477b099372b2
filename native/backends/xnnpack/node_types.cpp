#include "backends/xnnpack/node_types.h"

#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/nan_keeping_kernels.h"
#include "backends/xnnpack/etna_kernels.h"
#include "backends/xnnpack/payload.h"
#include "backends/xnnpack/shapes.h"

namespace etna::xnn {
namespace {

using Read = Status (*)(const void*, NodeReader&, Node&);
using ShapeRule = Status (*)(ShapeCall&);
using Define = xnn_status (*)(const DefineCall&);
using Run = Status (*)(const EtnaKernelCall&);

constexpr int64_t kAnyFlags = -1;
constexpr uint32_t kKeepDimsFlag = 0x40;  // newer XNNPACK only; the linked release does not know it

// A node the linked XNNPACK defines in a subgraph; its flags pass through.
constexpr NodeTypeInfo subgraph(NodeType type, const char* name, int8_t inputs, int8_t outputs, DatatypeRule datatypes,
                                Read read, ShapeRule shape, const char* define_name, Define define) {
  return {type,  name,   Engine::kSubgraph, inputs,  outputs, kAnyFlags, datatypes, nullptr, read,
          shape, define, define_name,       nullptr, nullptr};
}

// The define of a node whose XNNPACK call takes its input, output and flags.
template <xnn_status (*kDefine)(xnn_subgraph_t, uint32_t, uint32_t, uint32_t)>
xnn_status define_unary(const DefineCall& c) {
  return kDefine(c.subgraph, c.in[0], c.out[0], c.node.flags);
}

// ... its two inputs, output and flags.
template <xnn_status (*kDefine)(xnn_subgraph_t, uint32_t, uint32_t, uint32_t, uint32_t)>
xnn_status define_binary(const DefineCall& c) {
  return kDefine(c.subgraph, c.in[0], c.in[1], c.out[0], c.node.flags);
}

// ... a parameter of the node, its input, output and flags.
template <float Node::*kParameter, xnn_status (*kDefine)(xnn_subgraph_t, float, uint32_t, uint32_t, uint32_t)>
xnn_status define_unary_with(const DefineCall& c) {
  return kDefine(c.subgraph, c.node.*kParameter, c.in[0], c.out[0], c.node.flags);
}

// ... its output range, two inputs, output and flags.
template <xnn_status (*kDefine)(xnn_subgraph_t, float, float, uint32_t, uint32_t, uint32_t, uint32_t)>
xnn_status define_clamped_binary(const DefineCall& c) {
  return kDefine(c.subgraph, c.node.output_min, c.node.output_max, c.in[0], c.in[1], c.out[0], c.node.flags);
}

// A node run as a module-shared XNNPACK operator (packed_operator.cpp).
constexpr NodeTypeInfo packed(NodeType type, const char* name, int64_t allowed_flags, DatatypeRule datatypes, Read read,
                              ShapeRule shape) {
  return {
      type,    name,   Engine::kPackedOperator, 3, 1, allowed_flags, datatypes, nullptr, read, shape, nullptr, nullptr,
      nullptr, nullptr};
}

// A node etna runs itself (etna_kernels.cpp).
constexpr NodeTypeInfo etna_kernel(NodeType type, const char* name, int8_t inputs, int64_t allowed_flags,
                                   DatatypeRule datatypes, Read read, ShapeRule shape, Run run) {
  return {
      type, name,   Engine::kEtnaKernel, inputs, 1, allowed_flags, datatypes, nullptr, read, shape, nullptr, nullptr,
      run,  nullptr};
}

// A subgraph node that runs as etna's kernel `run` when `when` holds.
constexpr NodeTypeInfo as_etna_kernel_when(NodeTypeInfo info, bool (*when)(const Graph&, const Node&), Run run) {
  info.etna_kernel_when = when;
  info.run = run;
  return info;
}

bool converts_to_qdint8(const Graph& graph, const Node& node) {
  return graph.values[node.outputs[0]].datatype == Datatype::qdint8;
}

// An fp32 subgraph node whose XNNPACK kernel turns NaN into a bound: the
// NaN-keeping variant of the delegate runs it as `run` (nan_keeping_kernels.h).
constexpr NodeTypeInfo keeping_nan_with(NodeTypeInfo info, Run run) {
  info.run_keeping_nan = run;
  return info;
}

// A broadcasting binary node whose XNNPACK kernel turns NaN into a bound
// (arithmetic with an output range, minimum, maximum).
constexpr NodeTypeInfo binary_keeping_nan(NodeType type, const char* name, DatatypeRule datatypes,
                                          const char* define_name, Define define) {
  return keeping_nan_with(subgraph(type, name, 2, 1, datatypes, read_binary_node, broadcast_shape, define_name, define),
                          nan_keeping_binary_kernel);
}

// An etna kernel that can make NaN from numbers (NodeTypeInfo::may_make_nan).
constexpr NodeTypeInfo making_nan(NodeTypeInfo info) {
  info.may_make_nan = true;
  return info;
}

// A node every payload using it is rejected for, with the reason.
constexpr NodeTypeInfo rejected(NodeType type, const char* name, Read read, const char* reason) {
  return {type,
          name,
          Engine::kEtnaKernel,
          -1,
          -1,
          kAnyFlags,
          DatatypeRule::kUnsupported,
          reason,
          read,
          nullptr,
          nullptr,
          nullptr,
          nullptr,
          nullptr};
}

using R = DatatypeRule;
using T = NodeType;

// One row per wire code, in code order (checked below).
constexpr NodeTypeInfo kNodeTypes[] = {
    binary_keeping_nan(T::kAdd, "XNNAdd", R::kFloatOrQ8, "xnn_define_add2", define_clamped_binary<xnn_define_add2>),
    packed(T::kFullyConnected, "XNNFullyConnected", 0x1, R::kWeights, read_fully_connected_node, fully_connected_shape),
    keeping_nan_with(subgraph(T::kSoftmax, "XNNSoftmax", 1, 1, R::kFloat, read_unary_node, softmax_shape,
                              "xnn_define_softmax", define_unary<xnn_define_softmax>),
                     nan_keeping_softmax_kernel),
    keeping_nan_with(subgraph(T::kSigmoid, "XNNSigmoid", 1, 1, R::kFloatOrQ8, read_unary_node, same_shape_as_input,
                              "xnn_define_sigmoid", define_unary<xnn_define_sigmoid>),
                     nan_keeping_sigmoid_kernel),
    etna_kernel(T::kStaticTranspose, "XNNStaticTranspose", 1, kAnyFlags, R::kMovable, read_transpose_node,
                transpose_shape, transpose_kernel),
    keeping_nan_with(
        subgraph(T::kClamp, "XNNClamp", 1, 1, R::kFloatOrQ8, read_unary_node, same_shape_as_input, "xnn_define_clamp",
                 [](const DefineCall& c) {
                   return xnn_define_clamp(c.subgraph, c.node.output_min, c.node.output_max, c.in[0], c.out[0],
                                           c.node.flags);
                 }),
        nan_keeping_clamp_kernel),
    packed(T::kConv2d, "XNNConv2d", 0x4, R::kWeights, read_convolution_node, convolution_shape),
    binary_keeping_nan(T::kDiv, "XNNDiv", R::kFloat, "xnn_define_divide", define_clamped_binary<xnn_define_divide>),
    subgraph(T::kStaticResizeBilinear2d, "XNNStaticResizeBilinear2D", 1, 1, R::kFloatOrQ8, read_resize_bilinear_node,
             resize_bilinear_shape, "xnn_define_static_resize_bilinear_2d",
             [](const DefineCall& c) {
               return xnn_define_static_resize_bilinear_2d(c.subgraph, c.node.new_height, c.node.new_width, c.in[0],
                                                           c.out[0], c.node.flags);
             }),
    subgraph(T::kStaticConstantPad, "XNNStaticConstantPad", 1, 1, R::kFloatOrQ8, read_constant_pad_node,
             constant_pad_shape, "xnn_define_static_constant_pad",
             [](const DefineCall& c) {
               size_t pre[kMaxRank] = {}, post[kMaxRank] = {};
               for (size_t d = 0; d < c.node.pre_paddings.size() && d < kMaxRank; ++d) pre[d] = c.node.pre_paddings[d];
               for (size_t d = 0; d < c.node.post_paddings.size() && d < kMaxRank; ++d) {
                 post[d] = c.node.post_paddings[d];
               }
               return xnn_define_static_constant_pad(c.subgraph, pre, post, c.node.padding_value, c.in[0], c.out[0],
                                                     c.node.flags);
             }),
    keeping_nan_with(subgraph(T::kAvgPooling2d, "XNNAvgPooling2d", 1, 1, R::kFloat, read_pooling_node, pooling_shape,
                              "xnn_define_average_pooling_2d",
                              [](const DefineCall& c) {
                                const Node& n = c.node;
                                return xnn_define_average_pooling_2d(
                                    c.subgraph, n.padding_top, n.padding_right, n.padding_bottom, n.padding_left,
                                    n.kernel_height, n.kernel_width, n.stride_height, n.stride_width, n.output_min,
                                    n.output_max, c.in[0], c.out[0], n.flags & ~kKeepDimsFlag);
                              }),
                     nan_keeping_average_pooling_kernel),
    binary_keeping_nan(T::kMinimum, "XNNMinimum", R::kFloat, "xnn_define_minimum2", define_binary<xnn_define_minimum2>),
    packed(T::kDepthwiseConv2d, "XNNDepthwiseConv2d", 0x4, R::kWeights, read_convolution_node, convolution_shape),
    keeping_nan_with(subgraph(T::kMaxPooling2d, "XNNMaxPooling2d", 1, 1, R::kFloatOrQ8, read_pooling_node,
                              pooling_shape, "xnn_define_max_pooling_2d",
                              [](const DefineCall& c) {
                                const Node& n = c.node;
                                return xnn_define_max_pooling_2d(
                                    c.subgraph, n.padding_top, n.padding_right, n.padding_bottom, n.padding_left,
                                    n.kernel_height, n.kernel_width, n.stride_height, n.stride_width,
                                    n.dilation_height ? n.dilation_height : 1, n.dilation_width ? n.dilation_width : 1,
                                    n.output_min, n.output_max, c.in[0], c.out[0], n.flags & ~kKeepDimsFlag);
                              }),
                     nan_keeping_max_pooling_kernel),
    binary_keeping_nan(T::kMultiply, "XNNMultiply", R::kFloatOrQ8, "xnn_define_multiply2",
                       define_clamped_binary<xnn_define_multiply2>),
    binary_keeping_nan(T::kSubtract, "XNNSubtract", R::kFloatOrQ8, "xnn_define_subtract",
                       define_clamped_binary<xnn_define_subtract>),
    subgraph(T::kFloor, "XNNFloor", 1, 1, R::kFloat, read_unary_node, same_shape_as_input, "xnn_define_floor",
             define_unary<xnn_define_floor>),
    keeping_nan_with(
        as_etna_kernel_when(subgraph(T::kConvert, "XNNConvert", 1, 1, R::kConversion, read_unary_node,
                                     same_shape_as_input, "xnn_define_convert", define_unary<xnn_define_convert>),
                            converts_to_qdint8, quantize_per_token_kernel),
        nan_keeping_quantize_kernel),
    keeping_nan_with(subgraph(T::kGlobalAvgPooling2d, "XNNGlobalAvgPooling2d", 1, 1, R::kFloatOrQ8, read_unary_node,
                              global_pooling_shape, "xnn_define_global_average_pooling_2d",
                              [](const DefineCall& c) {
                                return xnn_define_global_average_pooling_2d(c.subgraph, c.node.output_min,
                                                                            c.node.output_max, c.in[0], c.out[0],
                                                                            c.node.flags & ~kKeepDimsFlag);
                              }),
                     nan_keeping_global_average_pooling_kernel),
    etna_kernel(T::kStaticReshape, "XNNStaticReshape", 1, kAnyFlags, R::kMovable, read_reshape_node, reshape_shape,
                copy_kernel),
    // The index output is declared fp32 and receives uint32 indices.
    subgraph(T::kArgMaxPooling2d, "XNNArgMaxPooling2d", 1, 2, R::kFloat, read_argmax_pooling_node, pooling_shape,
             "xnn_define_argmax_pooling_2d",
             [](const DefineCall& c) {
               const Node& n = c.node;
               return xnn_define_argmax_pooling_2d(c.subgraph, n.padding_top, n.padding_right, n.padding_bottom,
                                                   n.padding_left, n.kernel_height, n.kernel_width, c.in[0], c.out[0],
                                                   c.out[1], n.flags & ~kKeepDimsFlag);
             }),
    // Own, not XNNPACK's: the fast variant checks its output for NaN.
    making_nan(etna_kernel(T::kSquareRoot, "XNNSquareRoot", 1, kAnyFlags, R::kFloat, read_unary_node,
                           same_shape_as_input, sqrt_kernel)),
    subgraph(T::kCeiling, "XNNCeiling", 1, 1, R::kFloat, read_unary_node, same_shape_as_input, "xnn_define_ceiling",
             define_unary<xnn_define_ceiling>),
    subgraph(T::kHardswish, "XNNHardswish", 1, 1, R::kFloat, read_unary_node, same_shape_as_input,
             "xnn_define_hardswish", define_unary<xnn_define_hardswish>),
    subgraph(T::kLeakyRelu, "XNNLeakyReLU", 1, 1, R::kFloat, read_leaky_relu_node, same_shape_as_input,
             "xnn_define_leaky_relu", define_unary_with<&Node::negative_slope, xnn_define_leaky_relu>),
    binary_keeping_nan(T::kMaximum, "XNNMaximum", R::kFloat, "xnn_define_maximum2", define_binary<xnn_define_maximum2>),
    subgraph(T::kNegate, "XNNNegate", 1, 1, R::kFloat, read_unary_node, same_shape_as_input, "xnn_define_negate",
             define_unary<xnn_define_negate>),
    subgraph(T::kSquare, "XNNSquare", 1, 1, R::kFloat, read_unary_node, same_shape_as_input, "xnn_define_square",
             define_unary<xnn_define_square>),
    subgraph(T::kElu, "XNNELU", 1, 1, R::kFloatOrQs8, read_elu_node, same_shape_as_input, "xnn_define_elu",
             define_unary_with<&Node::alpha, xnn_define_elu>),
    subgraph(T::kAbs, "XNNAbs", 1, 1, R::kFloat, read_unary_node, same_shape_as_input, "xnn_define_abs",
             define_unary<xnn_define_abs>),
    // Etna's, not XNNPACK's: ONNX's and PyTorch's x < 0 ? x * slope : x to the bit, -0 (which XNNPACK
    // multiplies by a negative slope) and subnormals (which it flushes) included, and any broadcast slope.
    etna_kernel(T::kPRelu, "XNNPReLU", 2, kAnyFlags, R::kFloatSlope, read_binary_node, prelu_shape, prelu_kernel),
    etna_kernel(T::kConcatenate2, "XNNConcatenate2", 2, kAnyFlags, R::kMovable, read_concatenate_node,
                concatenate_shape, concatenate_kernel),
    etna_kernel(T::kConcatenate3, "XNNConcatenate3", 3, kAnyFlags, R::kMovable, read_concatenate_node,
                concatenate_shape, concatenate_kernel),
    etna_kernel(T::kConcatenate4, "XNNConcatenate4", 4, kAnyFlags, R::kMovable, read_concatenate_node,
                concatenate_shape, concatenate_kernel),
    etna_kernel(T::kStaticSlice, "XNNStaticSlice", 1, kAnyFlags, R::kMovable, read_slice_node, slice_shape,
                slice_kernel),
    rejected(T::kScaledDotProductAttention, "XNNScaledDotProductAttention", read_attention_node,
             "scaled dot-product attention is not implemented (upstream XNNPACK delegate rejects it too)"),
    etna_kernel(T::kBatchMatrixMultiply, "XNNBatchMatrixMultiply", 2, 0x1, R::kFloat, read_binary_node,
                batch_matmul_shape, batch_matmul_kernel),
    etna_kernel(T::kConcatenate5, "XNNConcatenate5", 5, kAnyFlags, R::kMovable, read_concatenate_node,
                concatenate_shape, concatenate_kernel),
    packed(T::kConvTranspose2d, "XNNConvTranspose2d", 0, R::kTensorWeights, read_convolution_node, convolution_shape),
    making_nan(etna_kernel(T::kReciprocalSquareRoot, "XNNReciprocalSquareRoot", 1, kAnyFlags, R::kFloat,
                           read_unary_node, same_shape_as_input, rsqrt_kernel)),
    making_nan(
        etna_kernel(T::kLog, "XNNLog", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, log_kernel)),
    etna_kernel(T::kGelu, "XNNGelu", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, gelu_kernel),
    etna_kernel(T::kTanh, "XNNTanh", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, tanh_kernel),
    etna_kernel(T::kExp, "XNNExp", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, exp_kernel),
    etna_kernel(T::kSin, "XNNSin", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, sin_kernel),
    etna_kernel(T::kCopy, "XNNCopy", 1, kAnyFlags, R::kMovable, read_unary_node, same_shape_as_input, copy_kernel),
    etna_kernel(T::kCos, "XNNCos", 1, kAnyFlags, R::kFloat, read_unary_node, same_shape_as_input, cos_kernel),
};

constexpr bool rows_in_code_order() {
  for (size_t i = 0; i < sizeof kNodeTypes / sizeof kNodeTypes[0]; ++i) {
    if (static_cast<size_t>(kNodeTypes[i].type) != i + 1) return false;
  }
  return true;
}
static_assert(sizeof kNodeTypes / sizeof kNodeTypes[0] == kLastNodeType, "one row per node type");
static_assert(rows_in_code_order(), "row i describes wire code i + 1");

}  // namespace

const NodeTypeInfo& node_type_info(NodeType type) { return kNodeTypes[static_cast<size_t>(type) - 1]; }

Engine engine_for(NodeType type) { return node_type_info(type).engine; }

bool is_elementwise(NodeType type) {
  switch (type) {
    case NodeType::kAdd:
    case NodeType::kSubtract:
    case NodeType::kMultiply:
    case NodeType::kDiv:
    case NodeType::kMinimum:
    case NodeType::kMaximum:
    case NodeType::kClamp:
    case NodeType::kSigmoid:
    case NodeType::kFloor:
    case NodeType::kCeiling:
    case NodeType::kConvert:
    case NodeType::kSquareRoot:
    case NodeType::kSquare:
    case NodeType::kNegate:
    case NodeType::kAbs:
    case NodeType::kHardswish:
    case NodeType::kLeakyRelu:
    case NodeType::kElu: return true;
    default: return false;
  }
}

Engine engine_for(const Graph& graph, const Node& node) {
  const NodeTypeInfo& info = node_type_info(node.type);
  return info.etna_kernel_when && info.etna_kernel_when(graph, node) ? Engine::kEtnaKernel : info.engine;
}

Status (*nan_keeping_kernel_for(const Graph& graph, const Node& node))(const EtnaKernelCall&) {
  const NodeTypeInfo& info = node_type_info(node.type);
  if (!info.run_keeping_nan || engine_for(graph, node) != Engine::kSubgraph) return nullptr;
  const Datatype output = graph.values[node.outputs[0]].datatype;
  // A Convert keeps NaN where it quantizes fp32 (its NaN becomes the lowest code); other nodes on fp32 outputs.
  if (node.type == NodeType::kConvert) {
    const bool quantizes = graph.values[node.inputs[0]].datatype == Datatype::fp32 &&
                           (output == Datatype::qint8 || output == Datatype::quint8);
    return quantizes ? info.run_keeping_nan : nullptr;
  }
  return output == Datatype::fp32 ? info.run_keeping_nan : nullptr;
}

Engine engine_for(const Graph& graph, const Node& node, NanHandling handling) {
  if (handling == NanHandling::kKeepNan && nan_keeping_kernel_for(graph, node)) return Engine::kEtnaKernel;
  return engine_for(graph, node);
}

std::string node_type_name(uint8_t code) {
  if (code == 0 || code > kLastNodeType) return "code " + std::to_string(code);
  return kNodeTypes[code - 1].name;
}

}  // namespace etna::xnn
