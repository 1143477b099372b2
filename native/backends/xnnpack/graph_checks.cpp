#include "backends/xnnpack/graph_checks.h"

#include <initializer_list>

namespace etna::xnn {
namespace {

Error unsupported(const Node& node, const std::string& what) {
  return make_error(ErrorCode::kUnsupportedOperator, node.describe() + ": " + what);
}
Error invalid(const Node& node, const std::string& what) {
  return make_error(ErrorCode::kInvalidProgram, node.describe() + ": " + what);
}

using Types = std::initializer_list<Datatype>;
const Types kFloat = {Datatype::fp32};
const Types kFloatOrQ8 = {Datatype::fp32, Datatype::qint8, Datatype::quint8};
const Types kFloatOrQs8 = {Datatype::fp32, Datatype::qint8};
const Types kMovable = {Datatype::fp32, Datatype::fp16, Datatype::qint8, Datatype::quint8, Datatype::qint32};
// Named lists: an initializer_list made inside an expression dies with it.
const Types kQs8Filters = {Datatype::qint8};
const Types kQs8OrPerChannelFilters = {Datatype::qint8, Datatype::qcint8};
const Types kDynamicFilters = {Datatype::qcint8, Datatype::qcint4, Datatype::qbint4};
const Types kDynamicConvFilters = {Datatype::qcint8};
// Keeps every int32 dot product of 8-bit codes (at most 255 * 128 each) exact.
constexpr size_t kMaxDynamicInputChannels = 65536;

std::string list_types(Types types) {
  std::string text;
  for (Datatype type : types) text += (text.empty() ? "" : ", ") + datatype_name(type);
  return text;
}

bool contains(Types types, Datatype type) {
  for (Datatype t : types) {
    if (t == type) return true;
  }
  return false;
}

class NodeChecker {
 public:
  NodeChecker(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

  const Value& value(uint32_t index) const { return graph_.values[index]; }

  Status arity(size_t inputs, size_t outputs) const {
    if (node_.inputs.size() != inputs || node_.outputs.size() != outputs) {
      return invalid(node_, "expects " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) +
                                " outputs, has " + std::to_string(node_.inputs.size()) + " and " +
                                std::to_string(node_.outputs.size()));
    }
    return Status::ok();
  }

  // The quantization a value of this datatype must carry.
  Status quantization_matches(uint32_t index, const char* role) const {
    const Value& v = value(index);
    using Kind = Quantization::Kind;
    const Kind needed = [&] {
      switch (v.datatype) {
        case Datatype::qint8:
        case Datatype::quint8:
        case Datatype::qint32: return Kind::kPerTensor;
        case Datatype::qcint8:
        case Datatype::qcint32:
        case Datatype::qcint4: return Kind::kPerChannel;
        case Datatype::qdint8: return Kind::kPerToken;
        case Datatype::qbint4: return Kind::kBlockwise;
        default: return Kind::kNone;
      }
    }();
    static const char* const kNames[] = {"no", "per-tensor", "per-channel", "per-token", "per-group"};
    if (needed != Kind::kNone && v.quant.kind != needed) {
      return invalid(node_, std::string(role) + " " + graph_.describe_value(index) + " needs " +
                                kNames[static_cast<size_t>(needed)] + " quantization parameters");
    }
    if (needed == Kind::kNone && v.quant.kind != Kind::kNone) {
      return invalid(node_, std::string(role) + " " + graph_.describe_value(index) +
                                " carries quantization parameters its datatype does not use");
    }
    if (v.datatype == Datatype::qint8 && (v.quant.zero_point < -128 || v.quant.zero_point > 127)) {
      return invalid(node_, std::string(role) + " " + graph_.describe_value(index) + " has zero point " +
                                std::to_string(v.quant.zero_point) + " outside int8");
    }
    if (v.datatype == Datatype::quint8 && (v.quant.zero_point < 0 || v.quant.zero_point > 255)) {
      return invalid(node_, std::string(role) + " " + graph_.describe_value(index) + " has zero point " +
                                std::to_string(v.quant.zero_point) + " outside uint8");
    }
    return Status::ok();
  }

  Status type_in(uint32_t index, Types allowed, const char* role) const {
    const Datatype type = value(index).datatype;
    if (!contains(allowed, type)) {
      return unsupported(node_, std::string(role) + " " + graph_.describe_value(index) + " has datatype " +
                                    datatype_name(type) + "; supported: " + list_types(allowed));
    }
    return quantization_matches(index, role);
  }

  // Every input and output has one datatype from `allowed`, the same for all.
  Status uniform(Types allowed) const {
    const uint32_t first = node_.inputs.empty() ? node_.outputs[0] : node_.inputs[0];
    ETNA_TRY(type_in(first, allowed, node_.inputs.empty() ? "output" : "input"));
    const Datatype type = value(first).datatype;
    auto same = [&](uint32_t index, const char* role) -> Status {
      if (index == kNoValue) return Status::ok();
      if (value(index).datatype != type) {
        return unsupported(node_, std::string(role) + " " + graph_.describe_value(index) + " has datatype " +
                                      datatype_name(value(index).datatype) + ", expected " + datatype_name(type) +
                                      " like the first input");
      }
      return quantization_matches(index, role);
    };
    for (uint32_t index : node_.inputs) ETNA_TRY(same(index, "input"));
    for (uint32_t index : node_.outputs) ETNA_TRY(same(index, "output"));
    return Status::ok();
  }

  // Data movement copies bytes, so quantized inputs and outputs must agree exactly.
  Status same_quantization() const {
    const Value& reference = value(node_.outputs[0]);
    if (reference.quant.kind != Quantization::Kind::kPerTensor) return Status::ok();
    for (uint32_t index : node_.inputs) {
      const Quantization& q = value(index).quant;
      if (q.scale != reference.quant.scale || q.zero_point != reference.quant.zero_point) {
        return unsupported(node_,
                           "input " + graph_.describe_value(index) +
                               " is quantized differently from the output; requantizing copies are not supported");
      }
    }
    return Status::ok();
  }

  Status constant(uint32_t index, const char* role) const {
    if (index != kNoValue && !value(index).is_constant) {
      return unsupported(node_, std::string(role) + " " + graph_.describe_value(index) +
                                    " must be a constant (the linked XNNPACK packs it at init)");
    }
    return Status::ok();
  }

  Status flags_within(uint32_t allowed) const {
    if (node_.flags & ~allowed) {
      return unsupported(node_,
                         "flags 0x" + to_hex(node_.flags) + " are not supported (allowed: 0x" + to_hex(allowed) + ")");
    }
    return Status::ok();
  }

  // Filter/bias datatypes of fully-connected and convolution nodes.
  Status weights(bool allow_per_channel) const {
    const uint32_t input = node_.inputs[0], filter = node_.inputs[1], bias = node_.inputs[2];
    const uint32_t output = node_.outputs[0];
    if (value(input).datatype == Datatype::qdint8) return dynamic_weights();
    ETNA_TRY(type_in(input, kFloatOrQ8, "input"));
    const Datatype type = value(input).datatype;
    if (value(output).datatype != type) {
      return unsupported(node_, "output " + graph_.describe_value(output) + " has datatype " +
                                    datatype_name(value(output).datatype) + ", expected " + datatype_name(type));
    }
    ETNA_TRY(quantization_matches(output, "output"));
    ETNA_TRY(constant(filter, "filter"));
    ETNA_TRY(constant(bias, "bias"));
    if (type == Datatype::fp32) {
      ETNA_TRY(type_in(filter, kFloat, "filter"));
      if (bias != kNoValue) ETNA_TRY(type_in(bias, kFloat, "bias"));
    } else if (type == Datatype::qint8) {
      const Types filters = allow_per_channel ? kQs8OrPerChannelFilters : kQs8Filters;
      ETNA_TRY(type_in(filter, filters, "filter"));
      if (value(filter).datatype == Datatype::qint8 && value(filter).quant.zero_point != 0) {
        return unsupported(node_, "filter " + graph_.describe_value(filter) + " has zero point " +
                                      std::to_string(value(filter).quant.zero_point) + "; signed 8-bit filters need 0");
      }
      if (bias != kNoValue) ETNA_TRY(type_in(bias, {Datatype::qint32, Datatype::qcint32}, "bias"));
    } else {
      ETNA_TRY(type_in(filter, {Datatype::quint8}, "filter"));
      if (bias != kNoValue) ETNA_TRY(type_in(bias, {Datatype::qint32}, "bias"));
    }
    return Status::ok();
  }

  // Fully connected (qd8 x qc8w / qc4w / qb4w) or convolution (qd8 x qc8w)
  // over a dynamically quantized input, fp32 out, run by etna kernels
  // (dynamic_linear.h, dynamic_conv.h).
  Status dynamic_weights() const {
    const uint32_t input = node_.inputs[0], filter = node_.inputs[1], bias = node_.inputs[2];
    const uint32_t output = node_.outputs[0];
    const bool convolution = node_.type == NodeType::kConv2d;
    if (node_.type != NodeType::kFullyConnected && !convolution) {
      return unsupported(node_, "input " + graph_.describe_value(input) +
                                    " is dynamically quantized; only fully-connected and XNNConv2d nodes take qdint8" +
                                    (node_.type == NodeType::kDepthwiseConv2d
                                         ? " (write a depthwise convolution as XNNConv2d with groups)"
                                         : ""));
    }
    ETNA_TRY(quantization_matches(input, "input"));
    if (value(input).producer < 0) {
      return unsupported(
          node_, "input " + graph_.describe_value(input) + " must be produced by a Convert node in the delegate");
    }
    // XNNPACK reads one scale and zero point per token (fully connected) or
    // per image (convolution, NHWC): the Convert must have made exactly those.
    const size_t nonbatch = value(input).quant.nonbatch_dims;
    const size_t needed = convolution ? 3 : 1;
    if (nonbatch != needed) {
      const std::string reader = convolution ? "a convolution needs 3 (one scale per image)"
                                             : "a fully-connected node needs 1 (one scale per token)";
      return unsupported(node_, "input " + graph_.describe_value(input) + " has num_nonbatch_dims " +
                                    std::to_string(nonbatch) + "; " + reader);
    }
    ETNA_TRY(type_in(output, kFloat, "output"));
    ETNA_TRY(constant(filter, "filter"));
    ETNA_TRY(constant(bias, "bias"));
    ETNA_TRY(type_in(filter, convolution ? kDynamicConvFilters : kDynamicFilters, "filter"));
    if (bias != kNoValue) ETNA_TRY(type_in(bias, kFloat, "bias"));
    if (convolution) return dynamic_convolution();
    const Value& w = value(filter);
    if (w.shape.rank != 2) {
      return unsupported(node_, "filter " + graph_.describe_value(filter) + " must be 2-d");
    }
    const bool transposed = node_.flags & 0x1;
    if (transposed && w.datatype != Datatype::qcint8) {
      return unsupported(node_, "filter " + graph_.describe_value(filter) +
                                    " with flag 0x1 ([in, out] layout) is supported for qcint8 only");
    }
    const size_t out_dim = transposed ? 1 : 0;
    if (w.quant.channel_dim != out_dim) {
      return unsupported(node_, "filter " + graph_.describe_value(filter) + " is quantized along dim " +
                                    std::to_string(w.quant.channel_dim) + ", expected its output dim " +
                                    std::to_string(out_dim));
    }
    const Shape& in_shape = value(input).shape;
    if (in_shape.dims[in_shape.rank - 1] != w.shape.dims[1 - out_dim]) {
      return invalid(node_, "input " + graph_.describe_value(input) + " has rows of " +
                                std::to_string(in_shape.dims[in_shape.rank - 1]) + " elements, filter " +
                                graph_.describe_value(filter) + " takes " + std::to_string(w.shape.dims[1 - out_dim]));
    }
    return dot_length_within(w.shape.dims[1 - out_dim]);
  }

  // The convolution's own fields (geometry against the filter is the shape
  // rule's): a [out, kh, kw, in/groups] filter quantized per output channel.
  Status dynamic_convolution() const {
    const uint32_t filter = node_.inputs[1];
    if (node_.flags & 0x4) {
      return unsupported(node_, "TensorFlow SAME padding (flag 0x4) is not supported over a qdint8 input");
    }
    const Value& w = value(filter);
    if (w.shape.rank != 4 || w.quant.channel_dim != 0) {
      return unsupported(node_, "filter " + graph_.describe_value(filter) + " quantized along dim " +
                                    std::to_string(w.quant.channel_dim) +
                                    " must be 4-d [out, kh, kw, in] and quantized along dim 0");
    }
    return dot_length_within(uint64_t{node_.kernel_height} * node_.kernel_width * node_.group_input_channels);
  }

  // Input channels one output sums over (a filter row).
  Status dot_length_within(uint64_t length) const {
    if (length > kMaxDynamicInputChannels) {
      return unsupported(node_, "filter " + graph_.describe_value(node_.inputs[1]) + " sums over " +
                                    std::to_string(length) + " inputs per output, more than " +
                                    std::to_string(kMaxDynamicInputChannels) + " (int32 sums could overflow)");
    }
    return Status::ok();
  }

  static std::string to_hex(uint32_t v) {
    static const char kDigits[] = "0123456789abcdef";
    std::string text;
    do {
      text.insert(text.begin(), kDigits[v & 15]);
      v >>= 4;
    } while (v);
    return text;
  }

 private:
  const Graph& graph_;
  const Node& node_;
};

Status check_conversion(const NodeChecker& check, const Node& node) {
  const Datatype from = check.value(node.inputs[0]).datatype;
  const Datatype to = check.value(node.outputs[0]).datatype;
  const Types others = {Datatype::fp16, Datatype::qint8, Datatype::quint8};
  const bool dynamic = from == Datatype::fp32 && to == Datatype::qdint8;
  const bool ok =
      dynamic || (from == Datatype::fp32 && contains(others, to)) || (contains(others, from) && to == Datatype::fp32);
  if (!ok) {
    return unsupported(node, "conversion from " + datatype_name(from) + " to " + datatype_name(to) +
                                 " is not supported (fp32 to and from fp16, qint8, quint8; fp32 to qdint8)");
  }
  if (dynamic && check.value(node.outputs[0]).is_output) {
    return unsupported(node, "output " + datatype_name(to) +
                                 " value is an external output; dynamically quantized values stay inside the delegate");
  }
  ETNA_TRY(check.quantization_matches(node.inputs[0], "input"));
  return check.quantization_matches(node.outputs[0], "output");
}

// Arity, flags, then datatypes, as the node's row states them.
Status check_node_types(const Graph& graph, const Node& node) {
  const NodeTypeInfo& info = node_type_info(node.type);
  if (info.datatypes == DatatypeRule::kUnsupported) return unsupported(node, info.unsupported);
  NodeChecker check(graph, node);
  if (info.inputs >= 0) ETNA_TRY(check.arity(static_cast<size_t>(info.inputs), static_cast<size_t>(info.outputs)));
  if (info.allowed_flags >= 0) ETNA_TRY(check.flags_within(static_cast<uint32_t>(info.allowed_flags)));
  switch (info.datatypes) {
    case DatatypeRule::kFloat: return check.uniform(kFloat);
    case DatatypeRule::kFloatOrQ8: return check.uniform(kFloatOrQ8);
    case DatatypeRule::kFloatOrQs8: return check.uniform(kFloatOrQs8);
    case DatatypeRule::kMovable: ETNA_TRY(check.uniform(kMovable)); return check.same_quantization();
    case DatatypeRule::kFloatSlope: ETNA_TRY(check.uniform(kFloat)); return check.constant(node.inputs[1], "slope");
    case DatatypeRule::kConversion: return check_conversion(check, node);
    case DatatypeRule::kWeights: return check.weights(true);
    case DatatypeRule::kTensorWeights: return check.weights(false);
    case DatatypeRule::kUnsupported: break;
  }
  return unsupported(node, info.unsupported);
}

}  // namespace

bool is_quantized(Datatype type) {
  return type == Datatype::qint8 || type == Datatype::quint8 || type == Datatype::qint32 || type == Datatype::qcint8 ||
         type == Datatype::qcint32;
}

Status check_graph(Graph& graph) {
  for (Value& value : graph.values) {
    value.producer = -1;
    value.consumers.clear();
  }
  for (Node& node : graph.nodes) {
    for (uint32_t index : node.inputs) {
      if (index == kNoValue) continue;
      Value& value = graph.values[index];
      if (!value.is_constant && !value.is_input && value.producer < 0) {
        return invalid(node, "input " + graph.describe_value(index) + " is used before any node produces it");
      }
      if (value.consumers.empty() || value.consumers.back() != node.index) {
        value.consumers.push_back(static_cast<uint32_t>(node.index));
      }
    }
    for (uint32_t index : node.outputs) {
      Value& value = graph.values[index];
      if (value.is_constant || value.is_input) {
        return invalid(node, "output " + graph.describe_value(index) + " is a constant or an external input");
      }
      if (value.producer >= 0) {
        return invalid(node, "output " + graph.describe_value(index) + " is already produced by node " +
                                 std::to_string(value.producer));
      }
      value.producer = static_cast<int>(node.index);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      for (size_t j = i + 1; j < node.outputs.size(); ++j) {
        if (node.outputs[i] == node.outputs[j]) return invalid(node, "writes the same value twice");
      }
    }
    ETNA_TRY(check_node_types(graph, node));
  }
  for (uint32_t index : graph.outputs) {
    if (graph.values[index].producer < 0) {
      return make_error(ErrorCode::kInvalidProgram,
                        "external output " + graph.describe_value(index) + " is produced by no node");
    }
  }
  return Status::ok();
}

}  // namespace etna::xnn
