#include "backends/xnnpack/subgraph_stage.h"

#include <unordered_map>

#include "backends/xnnpack/node_types.h"

namespace etna::xnn {
namespace {

xnn_datatype to_xnn(Datatype type) { return static_cast<xnn_datatype>(static_cast<int>(type)); }

class StageBuilder {
 public:
  StageBuilder(const Graph& graph, const SubgraphStage& stage, const std::vector<Shape>& shapes,
               const std::vector<const void*>& constant_data)
      : graph_(graph), stage_(stage), shapes_(shapes), constant_data_(constant_data) {}

  Result<StageRuntime> build(pthreadpool_t threadpool) {
    const std::string where = stage_.nodes.empty() ? "XNNPACK stage" : graph_.nodes[stage_.nodes.front()].describe();
    xnn_subgraph_t raw = nullptr;
    xnn_status status = xnn_create_subgraph(static_cast<uint32_t>(stage_.externals.size()), 0, &raw);
    if (status != xnn_status_success) return xnnpack_error(where, "xnn_create_subgraph", status);
    subgraph_.reset(raw);

    for (size_t k = 0; k < stage_.externals.size(); ++k) {
      const uint32_t flags = stage_.produced_here[k] ? XNN_VALUE_FLAG_EXTERNAL_OUTPUT : XNN_VALUE_FLAG_EXTERNAL_INPUT;
      ETNA_TRY(define_value(stage_.externals[k], static_cast<uint32_t>(k), flags, nullptr, where));
    }
    for (size_t node_index : stage_.nodes) ETNA_TRY(define_node(graph_.nodes[node_index]));

    xnn_runtime_t runtime = nullptr;
    status = xnn_create_runtime_v2(subgraph_.get(), threadpool, 0, &runtime);
    if (status != xnn_status_success)
      return xnnpack_error(where, "xnn_create_runtime_v2", status, ErrorCode::kInvalidProgram);
    result_.runtime.reset(runtime);
    return std::move(result_);
  }

 private:
  Status define_value(uint32_t index, uint32_t external_id, uint32_t flags, const void* data,
                      const std::string& where) {
    const Value& value = graph_.values[index];
    const Shape& shape = shapes_[index];
    size_t dims[kMaxRank];
    for (size_t d = 0; d < shape.rank; ++d) dims[d] = shape.dims[d];
    uint32_t id = kInvalidId;
    xnn_status status = xnn_status_success;
    const char* call = "";
    switch (value.quant.kind) {
      case Quantization::Kind::kPerTensor:
        call = "xnn_define_quantized_tensor_value";
        status = xnn_define_quantized_tensor_value(subgraph_.get(), to_xnn(value.datatype), value.quant.zero_point,
                                                   value.quant.scale, shape.rank, dims, data, external_id, flags, &id);
        break;
      case Quantization::Kind::kPerChannel:
        call = "xnn_define_channelwise_quantized_tensor_value";
        status = xnn_define_channelwise_quantized_tensor_value(
            subgraph_.get(), to_xnn(value.datatype), value.quant.channel_scales.data(), shape.rank,
            value.quant.channel_dim, dims, data, external_id, flags, &id);
        break;
      default:
        call = "xnn_define_tensor_value";
        status = xnn_define_tensor_value(subgraph_.get(), to_xnn(value.datatype), shape.rank, dims, data, external_id,
                                         flags, &id);
        break;
    }
    if (status != xnn_status_success) {
      return xnnpack_error(where + ", " + graph_.describe_value(index), call, status, ErrorCode::kInvalidProgram);
    }
    ids_[index] = id;
    return Status::ok();
  }

  // The XNNPACK id of value `index`; constants are defined on first use.
  Result<uint32_t> id_of(uint32_t index, const Node& node) {
    auto it = ids_.find(index);
    if (it != ids_.end()) return it->second;
    const Value& value = graph_.values[index];
    if (!value.is_constant || !constant_data_[index]) {
      return make_error(ErrorCode::kInternal, node.describe() + ": " + graph_.describe_value(index) + " is not bound");
    }
    ETNA_TRY(define_value(index, XNN_INVALID_VALUE_ID, 0, constant_data_[index], node.describe()));
    return ids_[index];
  }

  Status define_node(const Node& node) {
    const NodeTypeInfo& info = node_type_info(node.type);
    if (!info.define) return make_error(ErrorCode::kInternal, node.describe() + " is not an XNNPACK subgraph node");
    std::vector<uint32_t> in;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto id = id_of(node.inputs[i], node);
      if (!id) return id.error();
      in.push_back(*id);
    }
    std::vector<uint32_t> out;
    for (uint32_t index : node.outputs) out.push_back(ids_.at(index));

    const xnn_status status = info.define(DefineCall{node, subgraph_.get(), in, out});
    if (status != xnn_status_success) {
      return xnnpack_error(node.describe(), info.define_name, status, ErrorCode::kInvalidProgram);
    }
    return Status::ok();
  }

  const Graph& graph_;
  const SubgraphStage& stage_;
  const std::vector<Shape>& shapes_;
  const std::vector<const void*>& constant_data_;
  SubgraphPtr subgraph_;
  std::unordered_map<uint32_t, uint32_t> ids_;
  StageRuntime result_;
};

}  // namespace

void collect_stage_externals(const Graph& graph, SubgraphStage& stage) {
  stage.externals.clear();
  stage.produced_here.clear();
  auto add = [&](uint32_t index, bool produced) {
    if (index == kNoValue || graph.values[index].is_constant) return;
    for (uint32_t existing : stage.externals) {
      if (existing == index) return;
    }
    stage.externals.push_back(index);
    stage.produced_here.push_back(produced);
  };
  for (size_t node_index : stage.nodes) {
    const Node& node = graph.nodes[node_index];
    for (uint32_t index : node.inputs) add(index, false);
    for (uint32_t index : node.outputs) add(index, true);
  }
}

Result<StageRuntime> build_stage_runtime(const Graph& graph, const SubgraphStage& stage,
                                         const std::vector<Shape>& shapes,
                                         const std::vector<const void*>& constant_data, pthreadpool_t threadpool) {
  StageBuilder builder(graph, stage, shapes, constant_data);
  return builder.build(threadpool);
}

}  // namespace etna::xnn
