#include "backends/xnnpack/delegate.h"

#include <algorithm>
#include <cstring>

#include "backends/xnnpack/memory_plan.h"
#include "backends/xnnpack/nan_keeping_kernels.h"
#include "backends/xnnpack/etna_kernels.h"
#include "backends/xnnpack/rewrites.h"
#include "backends/xnnpack/shapes.h"
#include "core/bf16.h"
#include "core/parallel.h"
#include "kernels/real_elements.h"

namespace etna::xnn {
namespace {

constexpr uint64_t kMaxWorkspaceBytes = uint64_t{1} << 48;

// Element types an argument tensor may have for a value of this datatype.
bool dtype_matches(Datatype datatype, ScalarType dtype, bool argmax_index) {
  if (argmax_index) {
    return dtype == ScalarType::kLong || dtype == ScalarType::kInt || dtype == ScalarType::kUInt32 ||
           dtype == ScalarType::kFloat;
  }
  switch (datatype) {
    case Datatype::fp32: return dtype == ScalarType::kFloat;
    case Datatype::fp16: return dtype == ScalarType::kHalf;
    case Datatype::bf16: return dtype == ScalarType::kBFloat16;
    case Datatype::qint8: return dtype == ScalarType::kChar || dtype == ScalarType::kQInt8;
    case Datatype::quint8: return dtype == ScalarType::kByte || dtype == ScalarType::kQUInt8;
    case Datatype::qint32: return dtype == ScalarType::kInt || dtype == ScalarType::kQInt32;
    default: return false;
  }
}

// A tensor's dims in memory order (its dim order), which is the order
// XNNPACK sees. A one-element tensor may differ in rank from its value (the
// exporter writes [1] for 0-d tensors); it then takes the declared shape.
// `what()` names the argument; it is only called to build a message.
template <typename Describe>
Result<Shape> physical_shape(const Tensor& tensor, const Shape& declared, const Describe& what) {
  if (tensor.rank() != declared.rank) {
    if (tensor.numel() == 1 && declared.numel() == 1) return declared;
    return make_error(ErrorCode::kInvalidInput, what() + " has shape " + tensor.describe() + ", expected rank " +
                                                    std::to_string(declared.rank) + " like " + declared.to_string());
  }
  Shape shape;
  shape.rank = tensor.rank();
  const uint8_t* order = tensor.dim_order();
  for (size_t i = 0; i < shape.rank; ++i) {
    const int64_t size = tensor.size(order[i]);
    if (size < 0) return make_error(ErrorCode::kInvalidInput, what() + " has a negative size");
    shape.dims[i] = static_cast<size_t>(size);
  }
  return shape;
}

template <typename Describe>
Status resize_to_physical(Tensor& tensor, const Shape& shape, const Describe& what) {
  if (tensor.rank() != shape.rank) {
    if (tensor.numel() == 1 && shape.numel() == 1) return Status::ok();
    return make_error(ErrorCode::kInvalidInput, what() + " has rank " + std::to_string(tensor.rank()) +
                                                    ", the delegate computes " + shape.to_string());
  }
  int64_t sizes[kMaxRank] = {};
  const uint8_t* order = tensor.dim_order();
  for (size_t i = 0; i < shape.rank; ++i) sizes[order[i]] = static_cast<int64_t>(shape.dims[i]);
  Status status = tensor.resize(shape.rank, sizes);
  if (!status) {
    return make_error(ErrorCode::kInvalidInput,
                      what() + " cannot take the computed shape " + shape.to_string() + ": " + status.error().message);
  }
  return Status::ok();
}

// A stage's name in profiles: its node type and engine for a single node,
// the node types it fuses for a subgraph ("subgraph: XNNAdd, XNNMultiply").
std::string stage_name(const Graph& graph, Engine engine, const std::vector<size_t>& nodes) {
  const std::string first = node_type_name(graph.nodes[nodes[0]].type);
  if (engine == Engine::kPackedOperator) return first + " (packed operator)";
  if (engine == Engine::kEtnaKernel) return first + " (etna kernel)";
  std::vector<std::string> types;
  for (size_t node : nodes) {
    std::string type = node_type_name(graph.nodes[node].type);
    if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(std::move(type));
  }
  std::string name = "subgraph: ";
  for (size_t i = 0; i < types.size(); ++i) name += (i ? ", " : "") + types[i];
  return name;
}

// Bytes per element of the caller's tensor for an external value.
size_t argument_element_size(const Value& value) { return datatype_size(argument_datatype_of(value)); }

// A bf16 or fp16 argument's elements as fp32 (exact), and fp32 results rounded
// into one (to nearest even; NaN stays NaN, overflow becomes infinity).
void widen_16bit(Datatype type, const void* from, float* to, size_t count) {
  const auto* bits = static_cast<const uint16_t*>(from);
  for (size_t i = 0; i < count; ++i) {
    to[i] = type == Datatype::bf16 ? bfloat16_to_float(bits[i]) : kernels::half_to_float(bits[i]);
  }
}
void narrow_16bit(Datatype type, const float* from, void* to, size_t count) {
  auto* bits = static_cast<uint16_t*>(to);
  for (size_t i = 0; i < count; ++i) {
    bits[i] = type == Datatype::bf16 ? float_to_bfloat16(from[i]) : kernels::float_to_half(from[i]);
  }
}

// Whether a bf16 or fp16 buffer holds a NaN or an infinity (all exponent bits set).
bool has_16bit_specials(Datatype type, const void* data, size_t count) {
  const uint16_t exponent = type == Datatype::bf16 ? 0x7F80u : 0x7C00u;
  const auto* bits = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < count; ++i) {
    if ((bits[i] & exponent) == exponent) return true;
  }
  return false;
}

std::string arg_name(const Graph& graph, uint32_t index, const char* role) {
  return std::string("arg ") + std::to_string(graph.values[index].external_id) + " (" + role + " " +
         graph.describe_value(index) + ")";
}

// For a value a reshape or copy makes: the value whose bytes it can be
// (same datatype, and a reshape keeps the element count), or kNoValue.
// qdint8 keeps per-row parameters behind its data, placed by shape: copied.
uint32_t viewed_input(const Graph& graph, uint32_t v) {
  const Value& value = graph.values[v];
  if (value.producer < 0) return kNoValue;
  const Node& producer = graph.nodes[static_cast<size_t>(value.producer)];
  if (producer.type != NodeType::kStaticReshape && producer.type != NodeType::kCopy) return kNoValue;
  const uint32_t input = producer.inputs[0];
  const Value& source = graph.values[input];
  if (source.datatype != value.datatype || value.datatype == Datatype::qdint8) return kNoValue;
  return input;
}

// Whether XNNPACK's kernels for some node of the graph lose NaN: an fp32 node
// with a NaN-keeping kernel, or an fp32 XNNPACK packed operator.
bool loses_nan(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    if (nan_keeping_kernel_for(graph, node)) return true;
    if (engine_for(graph, node) == Engine::kPackedOperator &&
        PackedOperator::cache_key(graph, node, NanHandling::kFast) !=
            PackedOperator::cache_key(graph, node, NanHandling::kKeepNan)) {
      return true;
    }
  }
  return false;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* a_begin = static_cast<const uint8_t*>(a.data());
  const auto* b_begin = static_cast<const uint8_t*>(b.data());
  if (!a_begin || !b_begin) return false;
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

}  // namespace

Error XnnpackDelegate::error(ErrorCode code, const std::string& message) const {
  return make_error(code, label_ + ": " + message);
}

Status XnnpackDelegate::check(Graph& graph) {
  compute_16bit_externals_in_fp32(graph);
  ETNA_TRY(check_graph(graph));
  // Declared shapes must be consistent before anything packs or indexes by
  // them. Node by node, so the first inconsistent node is the one named.
  std::vector<Shape> shapes = declared_shapes(graph);
  for (const Node& node : graph.nodes) {
    Status inferred = infer_node_shapes(graph, node, shapes, true);
    if (!inferred) return make_error(ErrorCode::kInvalidProgram, inferred.error().message);
    for (uint32_t index : node.outputs) {
      if (shapes[index] != graph.values[index].shape) {
        return make_error(ErrorCode::kInvalidProgram, node.describe() + ": output " + graph.describe_value(index) +
                                                          " is declared " + graph.values[index].shape.to_string() +
                                                          " but its inputs give " + shapes[index].to_string());
      }
    }
  }
  return Status::ok();
}

Result<std::unique_ptr<XnnpackDelegate>> XnnpackDelegate::create(
    ParsedPayload parsed, XnnpackModuleContext& context, std::string label,
    const std::shared_ptr<XnnpackProgramContext>& program, bool checked, std::shared_ptr<const ParsedPayload> source,
    NanHandling handling, std::unique_ptr<XnnpackModuleContext> own_context) {
  std::unique_ptr<XnnpackDelegate> delegate(new XnnpackDelegate());
  delegate->label_ = std::move(label);
  delegate->handling_ = handling;
  auto fail = [&](const Error& e) { return make_error(e.code, delegate->label_ + ": " + e.message); };

  if (!checked) {
    Status valid = check(parsed.graph);
    if (!valid) return fail(valid.error());
  }
  if (handling == NanHandling::kFast && loses_nan(parsed.graph)) {
    delegate->loses_nan_ = true;
    delegate->source_ = source ? std::move(source) : std::make_shared<const ParsedPayload>(parsed);
    delegate->context_ = &context;
    delegate->own_context_ = std::move(own_context);
    delegate->program_ = program;
  }
  delegate->graph_ = std::move(parsed.graph);
  Graph& graph = delegate->graph_;

  delegate->workspace_ = context.workspace_for_delegate(program);
  delegate->thread_pool_ = context.thread_pool();
  Status staged = delegate->build_stages(context, program);
  if (!staged) return fail(staged.error());

  std::vector<size_t> signature;
  for (uint32_t index : graph.inputs) {
    const Shape& shape = graph.values[index].shape;
    signature.insert(signature.end(), shape.dims.begin(), shape.dims.begin() + shape.rank);
  }
  auto plan = delegate->build_plan(std::move(signature), true);
  if (!plan) return fail(plan.error());
  delegate->declared_plan_ = std::move(*plan);
  // Reserved now so the first call does not allocate (a pooled one goes
  // back to the pool, grown, for whichever call borrows it next).
  auto reserved = delegate->workspace_.acquire(delegate->declared_plan_->workspace_bytes);
  if (!reserved) return fail(reserved.error());

  // Constant bytes belong to the program; only source_ (for the NaN-keeping
  // variant, made during a call, after the program's own checks) reads them later.
  for (Value& value : graph.values) value.constant = ByteSpan{};
  return delegate;
}

Status XnnpackDelegate::build_stages(XnnpackModuleContext& context,
                                     const std::shared_ptr<XnnpackProgramContext>& program) {
  const size_t value_count = graph_.values.size();
  read_by_xnnpack_.assign(value_count, false);
  argmax_index_.assign(value_count, false);
  std::vector<bool> needs_copy(value_count, false);
  const std::vector<bool> folded = fold_transposes_into_matmuls(graph_);

  for (const Node& node : graph_.nodes) {
    if (folded[node.index]) continue;
    const Engine engine = engine_for(graph_, node, handling_);
    if (engine == Engine::kSubgraph && !stages_.empty() && stages_.back().engine == Engine::kSubgraph) {
      stages_.back().subgraph.nodes.push_back(node.index);
    } else {
      Stage stage;
      stage.engine = engine;
      stage.keeps_nan = handling_ == NanHandling::kKeepNan && nan_keeping_kernel_for(graph_, node);
      stage.checks_nan = loses_nan_ && engine == Engine::kEtnaKernel && node_type_info(node.type).may_make_nan;
      stage.subgraph.nodes.push_back(node.index);
      stages_.push_back(std::move(stage));
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const uint32_t index = node.inputs[i];
      if (index == kNoValue) continue;
      if (engine != Engine::kEtnaKernel) read_by_xnnpack_[index] = true;
      // Packed operators read filter and bias only while packing.
      const bool packed_weight = engine == Engine::kPackedOperator && i >= 1;
      if (graph_.values[index].is_constant && !packed_weight) needs_copy[index] = true;
    }
    if (node.type == NodeType::kArgMaxPooling2d) argmax_index_[node.outputs[1]] = true;
  }

  for (Stage& stage : stages_) {
    stage.name = stage_name(graph_, stage.engine, stage.subgraph.nodes);
    if (handling_ == NanHandling::kKeepNan) stage.name += " [keeping NaN]";
    if (stage.engine == Engine::kSubgraph) collect_stage_externals(graph_, stage.subgraph);
    if (stage.engine == Engine::kPackedOperator) {
      auto packed = context.packed_operator(program, graph_, graph_.nodes[stage.subgraph.nodes[0]], handling_);
      if (!packed) return packed.error();
      stage.packed = std::move(*packed);
    }
  }

  constants_.assign(value_count, nullptr);
  constant_data_.assign(value_count, nullptr);
  for (size_t v = 0; v < value_count; ++v) {
    if (!needs_copy[v]) continue;
    auto copy = context.constant_copy(program, graph_.values[v]);
    if (!copy) return copy.error();
    constants_[v] = std::move(*copy);
    constant_data_[v] = constants_[v]->data();
  }

  workspace_value_.assign(value_count, false);
  copy_out_.assign(value_count, false);
  for (size_t v = 0; v < value_count; ++v) {
    const Value& value = graph_.values[v];
    if (value.producer < 0) continue;
    // A 16-bit output is computed in the workspace and rounded into the caller's tensor.
    copy_out_[v] = value.is_output && (!value.consumers.empty() || value.argument_datatype != Datatype::invalid);
    workspace_value_[v] = !value.is_output || copy_out_[v];
  }
  // A reshape of a delegate input that only etna's kernels read can be the
  // caller's bytes (XNNPACK may read past a buffer's end; they have no slack).
  external_view_of_.assign(value_count, kNoValue);
  for (size_t v = 0; v < value_count; ++v) {
    const uint32_t input = viewed_input(graph_, static_cast<uint32_t>(v));
    if (input == kNoValue || !graph_.values[input].is_input) continue;
    if (workspace_value_[v] && !copy_out_[v] && !read_by_xnnpack_[v]) {
      external_view_of_[v] = input;
      workspace_value_[v] = false;
    }
  }
  // A value read only by the reshape or copy that makes a delegate output is
  // written straight into the caller's output (XNNPACK writes no further than
  // a value's end), so that reshape finds one buffer and copies nothing.
  output_view_of_.assign(value_count, kNoValue);
  for (uint32_t output : graph_.outputs) {
    const uint32_t source = viewed_input(graph_, output);
    if (source == kNoValue || copy_out_[output] || argmax_index_[output] || argmax_index_[source]) continue;
    const Value& value = graph_.values[source];
    if (value.is_output || value.producer < 0 || external_view_of_[source] != kNoValue) continue;
    const auto reshape = static_cast<uint32_t>(graph_.values[output].producer);
    if (!std::all_of(value.consumers.begin(), value.consumers.end(), [&](uint32_t c) { return c == reshape; }))
      continue;
    output_view_of_[source] = output;
    workspace_value_[source] = false;
  }
  return Status::ok();
}

Result<std::unique_ptr<XnnpackDelegate::ShapePlan>> XnnpackDelegate::build_plan(std::vector<size_t> signature,
                                                                                bool declared) {
  auto plan = std::make_unique<ShapePlan>();
  plan->shapes = declared_shapes(graph_);
  if (!declared) {
    size_t cursor = 0;
    for (uint32_t index : graph_.inputs) {
      Shape& shape = plan->shapes[index];
      for (size_t d = 0; d < shape.rank; ++d) shape.dims[d] = signature[cursor++];
    }
    ETNA_TRY(infer_shapes(graph_, plan->shapes, false));
  }
  // (The declared pass was inferred and compared in create().)
  plan->signature = std::move(signature);

  std::vector<BufferLifetime> buffers;
  std::vector<uint32_t> owners;
  uint64_t total_bytes = 0;
  for (size_t v = 0; v < graph_.values.size(); ++v) {
    if (!workspace_value_[v]) continue;
    const Value& value = graph_.values[v];
    BufferLifetime buffer;
    buffer.bytes = value_bytes(value.datatype, plan->shapes[v]) + kReadPadding;
    // Shapes are capped per tensor; the sum over many tensors is capped here.
    total_bytes += round_up(buffer.bytes, kWorkspaceAlignment);
    if (total_bytes > kMaxWorkspaceBytes) {
      return make_error(declared ? ErrorCode::kInvalidProgram : ErrorCode::kInvalidInput,
                        "intermediates would need more than " + std::to_string(kMaxWorkspaceBytes) + " bytes");
    }
    buffer.first = static_cast<size_t>(value.producer);
    buffer.last = buffer.first;
    for (uint32_t consumer : value.consumers) buffer.last = std::max<size_t>(buffer.last, consumer);
    if (copy_out_[v]) buffer.last = graph_.nodes.size();
    buffers.push_back(buffer);
    owners.push_back(static_cast<uint32_t>(v));
  }
  mark_views(owners, buffers);
  const BufferPlacement placement = place_buffers(buffers);
  plan->offsets.assign(graph_.values.size(), kNotInWorkspace);
  for (size_t i = 0; i < owners.size(); ++i) plan->offsets[owners[i]] = placement.offsets[i];
  plan->workspace_bytes = placement.total_bytes;

  plan->runtimes.resize(stages_.size());
  plan->stage_pools.assign(stages_.size(), nullptr);
  for (size_t s = 0; s < stages_.size(); ++s) {
    plan->stage_pools[s] = stage_pool(stages_[s], plan->shapes);
    if (stages_[s].engine != Engine::kSubgraph) continue;
    auto runtime = build_stage_runtime(graph_, stages_[s].subgraph, plan->shapes, constant_data_, plan->stage_pools[s]);
    if (!runtime) return runtime.error();
    plan->runtimes[s] = std::move(*runtime);
  }
  return plan;
}

pthreadpool_t XnnpackDelegate::stage_pool(const Stage& stage, const std::vector<Shape>& shapes) const {
  // etna kernels split their work themselves (parallel.h) and get the pool.
  if (stage.engine == Engine::kEtnaKernel) return pool();
  // XNNPACK splits any operator over every thread it is given, so a tiny one
  // would wake the workers for less than the wake-up costs: the same rule
  // as etna kernels decides whether it gets the pool.
  if (stage.engine == Engine::kPackedOperator) {
    const Node& node = graph_.nodes[stage.subgraph.nodes[0]];
    const Shape& input = shapes[node.inputs[0]];
    const size_t reduced = node.type == NodeType::kFullyConnected
                               ? (input.rank ? input.dims[input.rank - 1] : 1)
                               : size_t{node.kernel_height} * node.kernel_width * node.group_input_channels;
    const size_t macs = shapes[node.outputs[0]].numel() * reduced;
    const bool fp32 = graph_.values[node.inputs[0]].datatype == Datatype::fp32;
    return pool_for(pool(), task_count(pool(), macs, fp32 ? kMinTaskFloatMacs : kMinTaskIntegerMacs));
  }
  // The linked XNNPACK splits an elementwise operator into one task per row
  // of its innermost dimension after broadcasting (one task in all when
  // nothing broadcasts) or into 4 KiB blocks: a second thread only adds
  // hand-offs. Measured on a 128-token Llama prefill at 2 threads, such
  // stages took 1.2 to 3.3x their one-thread time (docs/performance.md).
  const bool elementwise_only = std::all_of(stage.subgraph.nodes.begin(), stage.subgraph.nodes.end(),
                                            [&](size_t index) { return is_elementwise(graph_.nodes[index].type); });
  if (elementwise_only) return nullptr;
  size_t bytes = 0;  // what the subgraph's nodes write
  for (size_t index : stage.subgraph.nodes) {
    const Node& node = graph_.nodes[index];
    for (uint32_t output : node.outputs) bytes += shapes[output].numel() * sizeof(float);
  }
  return pool_for(pool(), task_count(pool(), bytes, kMinTaskBytes));
}

void XnnpackDelegate::mark_views(const std::vector<uint32_t>& owners, std::vector<BufferLifetime>& buffers) const {
  std::vector<size_t> buffer_of(graph_.values.size(), kOwnBytes);
  for (size_t i = 0; i < owners.size(); ++i) buffer_of[owners[i]] = i;
  for (size_t i = 0; i < owners.size(); ++i) {
    const uint32_t input = viewed_input(graph_, owners[i]);
    // Not in the workspace: the caller's bytes (see external_view_of_) or a constant's.
    if (input != kNoValue) buffers[i].view_of = buffer_of[input];
  }
}

Result<XnnpackDelegate::ShapePlan*> XnnpackDelegate::plan_for(const std::vector<size_t>& signature) {
  if (signature == declared_plan_->signature) return declared_plan_.get();
  for (auto& plan : dynamic_plans_) {
    if (plan->signature == signature) {
      plan->last_used = calls_;
      return plan.get();
    }
  }
  // A new input shape: infer, plan and build XNNPACK runtimes for it. Packed
  // operators take shapes at setup, so their weights are not packed again.
  auto built = build_plan(signature, false);
  if (!built) return error(built.error().code, built.error().message);
  (*built)->last_used = calls_;
  if (dynamic_plans_.size() >= kMaxDynamicPlans) {
    auto oldest = std::min_element(dynamic_plans_.begin(), dynamic_plans_.end(),
                                   [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
    dynamic_plans_.erase(oldest);
  }
  dynamic_plans_.push_back(std::move(*built));
  return dynamic_plans_.back().get();
}

Status XnnpackDelegate::execute(EValue* const* args, size_t count, ProfileRecorder* profile) {
  ++calls_;
  if (count != graph_.num_externs) {
    return error(ErrorCode::kInvalidInput, "called with " + std::to_string(count) + " arguments, the delegate has " +
                                               std::to_string(graph_.num_externs) + " inputs and outputs");
  }
  auto tensor_arg = [&](uint32_t index, const char* role) -> Result<Tensor*> {
    const Value& value = graph_.values[index];
    EValue* arg = args[value.external_id];
    if (!arg || !arg->is_tensor()) {
      return error(ErrorCode::kInvalidInput, arg_name(graph_, index, role) + " is not a tensor");
    }
    Tensor& tensor = arg->to_tensor();
    if (!dtype_matches(argument_datatype_of(value), tensor.dtype(), argmax_index_[index])) {
      return error(ErrorCode::kInvalidInput, arg_name(graph_, index, role) + " has dtype " +
                                                 std::string(dtype_name(tensor.dtype())) + ", expected " +
                                                 datatype_name(argument_datatype_of(value)) + " data");
    }
    return &tensor;
  };

  signature_.clear();
  for (uint32_t index : graph_.inputs) {
    auto tensor = tensor_arg(index, "input");
    if (!tensor) return tensor.error();
    auto shape = physical_shape(**tensor, graph_.values[index].shape, [&] { return arg_name(graph_, index, "input"); });
    if (!shape) return error(shape.error().code, shape.error().message);
    // Checked before a plan is built for the shape: the bytes must exist.
    const size_t bytes = shape->numel() * argument_element_size(graph_.values[index]);
    if (bytes && (!(*tensor)->data() || (*tensor)->capacity() < bytes)) {
      return error(ErrorCode::kInvalidInput, arg_name(graph_, index, "input") + " has " +
                                                 std::to_string((*tensor)->data() ? (*tensor)->capacity() : 0) +
                                                 " bytes of data, needs " + std::to_string(bytes));
    }
    signature_.insert(signature_.end(), shape->dims.begin(), shape->dims.begin() + shape->rank);
  }
  for (uint32_t index : graph_.outputs) {
    auto tensor = tensor_arg(index, "output");
    if (!tensor) return tensor.error();
  }
  auto plan = plan_for(signature_);
  if (!plan) return plan.error();
  if (loses_nan_ && inputs_not_finite(**plan, args)) return execute_keeping_nan(args, count, profile);
  ETNA_TRY(run(**plan, args, profile));
  if (loses_nan_ && may_hide_nan(**plan, args)) return execute_keeping_nan(args, count, profile);
  return Status::ok();
}

bool XnnpackDelegate::inputs_not_finite(const ShapePlan& plan, EValue* const* args) const {
  for (uint32_t index : graph_.inputs) {
    const Value& value = graph_.values[index];
    const Tensor& tensor = args[value.external_id]->to_tensor();
    if (value.argument_datatype != Datatype::invalid) {
      if (has_16bit_specials(value.argument_datatype, tensor.data(), plan.shapes[index].numel())) return true;
      continue;
    }
    if (value.datatype != Datatype::fp32) continue;
    const FloatSpecials found = float_specials(static_cast<const float*>(tensor.data()), plan.shapes[index].numel());
    if (found.nan || found.infinity) return true;
  }
  return false;
}

bool XnnpackDelegate::may_hide_nan(const ShapePlan& plan, EValue* const* args) const {
  bool suspect = made_nan_;
  for (uint32_t index : graph_.outputs) {
    if (suspect) break;
    const Value& value = graph_.values[index];
    const Tensor& tensor = args[value.external_id]->to_tensor();
    if (value.argument_datatype != Datatype::invalid) {
      suspect = has_16bit_specials(value.argument_datatype, tensor.data(), plan.shapes[index].numel());
      continue;
    }
    if (value.datatype != Datatype::fp32 || argmax_index_[index]) continue;
    // An infinity may be a clamped NaN; a NaN may be one XNNPACK made where
    // the answer is a number (its sigmoid of a huge input).
    const FloatSpecials found = float_specials(static_cast<const float*>(tensor.data()), plan.shapes[index].numel());
    suspect = found.infinity || found.nan;
  }
  if (!suspect) return false;
  // Running again needs the inputs as they were.
  for (uint32_t output : graph_.outputs) {
    const Tensor& written = args[graph_.values[output].external_id]->to_tensor();
    for (uint32_t input : graph_.inputs) {
      if (overlaps(written, args[graph_.values[input].external_id]->to_tensor())) return false;
    }
  }
  return true;
}

Status XnnpackDelegate::execute_keeping_nan(EValue* const* args, size_t count, ProfileRecorder* profile) {
  if (!keeping_nan_) {
    auto made = create(*source_, *context_, label_, program_, true, nullptr, NanHandling::kKeepNan);
    if (!made) return made.error();
    keeping_nan_ = std::move(*made);
  }
  ++nan_keeping_calls_;
  return keeping_nan_->execute(args, count, profile);
}

Status XnnpackDelegate::run(ShapePlan& plan, EValue* const* args, ProfileRecorder* profile) {
  const size_t value_count = graph_.values.size();

  // Inputs XNNPACK reads may be over-read by XNN_EXTRA_BYTES; caller buffers
  // without that slack are staged into the workspace.
  // A 16-bit input is always staged: widened to fp32 there.
  size_t staging_bytes = 0;
  for (uint32_t index : graph_.inputs) {
    const Tensor& tensor = args[graph_.values[index].external_id]->to_tensor();
    const size_t bytes = plan.shapes[index].numel() * datatype_size(graph_.values[index].datatype);
    const bool widened = graph_.values[index].argument_datatype != Datatype::invalid;
    if (widened || (read_by_xnnpack_[index] && tensor.capacity() < bytes + XNN_EXTRA_BYTES)) {
      staging_bytes += round_up(bytes + kReadPadding, kWorkspaceAlignment);
    }
  }
  // Held until the outputs are written; pooled, it may be another one each call.
  auto workspace = workspace_.acquire(plan.workspace_bytes + staging_bytes);
  if (!workspace) return error(workspace.error().code, workspace.error().message);
  uint8_t* base = (*workspace)->data();

  data_.assign(value_count, nullptr);
  for (size_t v = 0; v < value_count; ++v) {
    if (constant_data_[v]) data_[v] = const_cast<void*>(constant_data_[v]);
    if (plan.offsets[v] != kNotInWorkspace) data_[v] = base + plan.offsets[v];
  }
  size_t staging_cursor = plan.workspace_bytes;
  for (uint32_t index : graph_.inputs) {
    Tensor& tensor = args[graph_.values[index].external_id]->to_tensor();
    const size_t bytes = plan.shapes[index].numel() * datatype_size(graph_.values[index].datatype);
    data_[index] = tensor.data();
    const Datatype widened = graph_.values[index].argument_datatype;
    if (widened != Datatype::invalid || (read_by_xnnpack_[index] && tensor.capacity() < bytes + XNN_EXTRA_BYTES)) {
      uint8_t* staged = base + staging_cursor;
      if (widened != Datatype::invalid) {
        widen_16bit(widened, tensor.data(), reinterpret_cast<float*>(staged), plan.shapes[index].numel());
      } else if (bytes) {
        std::memcpy(staged, tensor.data(), bytes);
      }
      data_[index] = staged;
      staging_cursor += round_up(bytes + kReadPadding, kWorkspaceAlignment);
    }
  }
  for (size_t v = 0; v < value_count; ++v) {
    if (external_view_of_[v] != kNoValue) data_[v] = data_[external_view_of_[v]];
  }
  for (uint32_t index : graph_.outputs) {
    Tensor& tensor = args[graph_.values[index].external_id]->to_tensor();
    auto what = [&] { return arg_name(graph_, index, "output"); };
    Status resized = resize_to_physical(tensor, plan.shapes[index], what);
    if (!resized) return error(resized.error().code, resized.error().message);
    const size_t bytes =
        plan.shapes[index].numel() * std::max(tensor.element_size(), argument_element_size(graph_.values[index]));
    if (bytes && (!tensor.data() || tensor.capacity() < bytes)) {
      return error(ErrorCode::kInvalidInput, what() + " has " + std::to_string(tensor.data() ? tensor.capacity() : 0) +
                                                 " bytes of room, needs " + std::to_string(bytes));
    }
    if (!copy_out_[index]) data_[index] = tensor.data();
  }
  for (size_t v = 0; v < value_count; ++v) {
    if (output_view_of_[v] != kNoValue) data_[v] = data_[output_view_of_[v]];
  }

  made_nan_ = false;
  pthreadpool_t pool = this->pool();
  // However the call ends, the pool's workers sleep rather than spin after
  // it, unless another call is computing on the pool.
  const ThreadPool::Call on_pool(thread_pool_.get());
  for (size_t s = 0; s < stages_.size(); ++s) {
    Stage& stage = stages_[s];
    const Node& first = graph_.nodes[stage.subgraph.nodes[0]];
    const ProfileScope timed(profile, ProfileCategory::kStage, stage.name, static_cast<int64_t>(s));
    switch (stage.engine) {
      case Engine::kSubgraph: {
        const auto& externals = stage.subgraph.externals;
        externals_.resize(externals.size());
        for (size_t k = 0; k < externals.size(); ++k) {
          externals_[k].id = static_cast<uint32_t>(k);
          externals_[k].data = data_[externals[k]];
        }
        xnn_runtime_t runtime = plan.runtimes[s].runtime.get();
        xnn_status status = xnn_setup_runtime(runtime, externals_.size(), externals_.data());
        if (status != xnn_status_success) {
          const Error e = xnnpack_error(first.describe(), "xnn_setup_runtime", status);
          return error(e.code, e.message);
        }
        ThreadPool::note_work(plan.stage_pools[s]);
        status = xnn_invoke_runtime(runtime);
        if (status != xnn_status_success) {
          const Error e = xnnpack_error(first.describe(), "xnn_invoke_runtime", status);
          return error(e.code, e.message);
        }
        break;
      }
      case Engine::kPackedOperator: {
        Status ran = stage.packed->run(first, plan.shapes[first.inputs[0]], data_[first.inputs[0]],
                                       plan.shapes[first.outputs[0]], data_[first.outputs[0]], plan.stage_pools[s]);
        if (!ran) return error(ran.error().code, ran.error().message);
        break;
      }
      case Engine::kEtnaKernel: {
        Status ran = stage.keeps_nan ? run_nan_keeping_kernel(graph_, first, plan.shapes, data_.data())
                                     : run_etna_kernel(graph_, first, plan.shapes, data_.data(), pool);
        if (!ran) return error(ran.error().code, ran.error().message);
        if (stage.checks_nan && !made_nan_) {
          const auto* made = static_cast<const float*>(data_[first.outputs[0]]);
          made_nan_ = float_specials(made, plan.shapes[first.outputs[0]].numel()).nan;
        }
        break;
      }
    }
  }

  for (uint32_t index : graph_.outputs) {
    Tensor& tensor = args[graph_.values[index].external_id]->to_tensor();
    const size_t count = plan.shapes[index].numel();
    const Datatype narrowed = graph_.values[index].argument_datatype;
    if (copy_out_[index] && count && narrowed != Datatype::invalid) {
      narrow_16bit(narrowed, static_cast<const float*>(data_[index]), tensor.data(), count);
    } else if (copy_out_[index] && count) {
      std::memcpy(tensor.data(), data_[index], count * datatype_size(graph_.values[index].datatype));
    }
    // XNNPACK writes argmax indices as uint32; widen in place, last first.
    if (argmax_index_[index] && tensor.dtype() == ScalarType::kLong) {
      uint8_t* bytes = static_cast<uint8_t*>(tensor.data());
      for (size_t i = count; i-- > 0;) {
        uint32_t narrow = 0;
        std::memcpy(&narrow, bytes + i * 4, 4);
        const int64_t wide = narrow;
        std::memcpy(bytes + i * 8, &wide, 8);
      }
    }
  }
  return Status::ok();
}

}  // namespace etna::xnn
