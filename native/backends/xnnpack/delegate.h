// One initialised XNNPACK delegate instance: the checked graph split into a
// sequence of stages (XNNPACK subgraph runtimes, shared packed operators and
// etna kernels), with a plan per input-shape signature saying where
// every intermediate lives in the workspace.
//
// NaN: the linked (2022) XNNPACK clamps fp32 outputs even when the bounds
// are infinite, which turns NaN into a bound. A call whose fp32 inputs are
// all finite runs on XNNPACK's kernels (fast); a NaN can only arise inside
// from 0/0, Inf - Inf and the like, and is then clamped to an infinity, so a
// call whose fp32 outputs hold an infinity is run again on the NaN-keeping
// variant, which a call with NaN or infinite inputs runs from the start; so
// is a call whose fp32 outputs hold NaN (the 2022 sigmoid gives NaN for
// inputs beyond about 6e26, which an overflow inside can make).
// That variant (NanHandling::kKeepNan) is a second delegate over the same
// graph, made at its first use: fp32 nodes that lose NaN run as etna kernels
// (nan_keeping_kernels.h) and packed fp32 operators are checked
// (PackedOperator::create). A NaN made inside from finite inputs that a
// later node hides (relu(0/0) is 0 on XNNPACK) is not detected.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/graph_checks.h"
#include "backends/xnnpack/memory_plan.h"
#include "backends/xnnpack/module_context.h"
#include "backends/xnnpack/packed_operator.h"
#include "backends/xnnpack/payload.h"
#include "backends/xnnpack/subgraph_stage.h"
#include "core/backend.h"

namespace etna::xnn {

class XnnpackDelegate final : public DelegateHandle {
 public:
  // `label` prefixes every message ("method 'forward', delegate 0 (XnnpackBackend)").
  // Packed weights come from `program` (shared with the program's other
  // modules); null keeps them to `context`. `checked`: check() already
  // passed on this graph (XnnpackProgramContext::checked_payload).
  // `source`: the same payload as `parsed`, kept for making the NaN-keeping
  // variant later (null: a copy of `parsed` is kept when the graph needs one).
  // `own_context`: `context` when the delegate owns it (no module made it).
  static Result<std::unique_ptr<XnnpackDelegate>> create(
      ParsedPayload parsed, XnnpackModuleContext& context, std::string label,
      const std::shared_ptr<XnnpackProgramContext>& program = nullptr, bool checked = false,
      std::shared_ptr<const ParsedPayload> source = nullptr, NanHandling handling = NanHandling::kFast,
      std::unique_ptr<XnnpackModuleContext> own_context = nullptr);

  // The graph's rules (check_graph) and its declared shapes' consistency;
  // fills the producers and consumers of its values.
  static Status check(Graph& graph);

  using DelegateHandle::execute;
  Status execute(EValue* const* args, size_t count, ProfileRecorder* profile) override;
  std::optional<size_t> argument_count() const override { return graph_.num_externs; }

  // For tests: how many shape plans (declared one included) are cached.
  size_t cached_plans() const { return 1 + dynamic_plans_.size(); }
  // For tests: workspace bytes the declared input shapes need.
  size_t declared_workspace_bytes() const { return declared_plan_->workspace_bytes; }
  // For tests: calls the NaN-keeping variant ran.
  uint64_t nan_keeping_calls() const { return nan_keeping_calls_; }

 private:
  struct Stage {
    Engine engine = Engine::kSubgraph;
    SubgraphStage subgraph;                  // nodes (all engines) and externals (subgraph)
    std::shared_ptr<PackedOperator> packed;  // kPackedOperator
    bool keeps_nan = false;                  // kEtnaKernel: the node's NaN-keeping kernel
    bool checks_nan = false;                 // kEtnaKernel, fast variant: may make NaN (NodeTypeInfo::may_make_nan)
    std::string name;                        // for profiles: "XNNFullyConnected (packed operator)"
  };

  // Everything that depends on the input shapes.
  struct ShapePlan {
    std::vector<size_t> signature;  // physical dims of every external input, in order
    std::vector<Shape> shapes;      // per value
    std::vector<size_t> offsets;    // per value: workspace offset, or kNotInWorkspace
    size_t workspace_bytes = 0;
    std::vector<StageRuntime> runtimes;  // per stage; empty for non-subgraph stages
    // Per stage: the pool its XNNPACK runtime or packed operator runs on,
    // null where the work at these shapes is too small to wake a worker for.
    std::vector<pthreadpool_t> stage_pools;
    uint64_t last_used = 0;
  };
  static constexpr size_t kNotInWorkspace = SIZE_MAX;
  static constexpr size_t kMaxDynamicPlans = 8;

  XnnpackDelegate() = default;

  Status build_stages(XnnpackModuleContext& context, const std::shared_ptr<XnnpackProgramContext>& program);
  Result<std::unique_ptr<ShapePlan>> build_plan(std::vector<size_t> signature, bool declared);
  pthreadpool_t stage_pool(const Stage& stage, const std::vector<Shape>& shapes) const;
  // Reshapes and copies whose output can be their input's bytes: marked as
  // views, so the copy kernel finds one buffer and copies nothing.
  void mark_views(const std::vector<uint32_t>& owners, std::vector<BufferLifetime>& buffers) const;
  Result<ShapePlan*> plan_for(const std::vector<size_t>& signature);
  Status run(ShapePlan& plan, EValue* const* args, ProfileRecorder* profile);
  // Whether a call must run on the NaN-keeping variant: before the fast run,
  // an fp32 input holds NaN or an infinity; after it, a node that may make
  // NaN made one or an fp32 output holds NaN or an infinity, and no output
  // overwrote an input.
  bool inputs_not_finite(const ShapePlan& plan, EValue* const* args) const;
  bool may_hide_nan(const ShapePlan& plan, EValue* const* args) const;
  Status execute_keeping_nan(EValue* const* args, size_t count, ProfileRecorder* profile);
  Error error(ErrorCode code, const std::string& message) const;
  pthreadpool_t pool() const { return thread_pool_ ? thread_pool_->get() : nullptr; }

  std::string label_;
  NanHandling handling_ = NanHandling::kFast;
  // kFast, when some fp32 node loses NaN on XNNPACK: what the NaN-keeping
  // variant is made from, and that variant once made.
  bool loses_nan_ = false;
  std::shared_ptr<const ParsedPayload> source_;
  XnnpackModuleContext* context_ = nullptr;
  std::unique_ptr<XnnpackModuleContext> own_context_;
  std::shared_ptr<XnnpackProgramContext> program_;
  std::unique_ptr<XnnpackDelegate> keeping_nan_;
  uint64_t nan_keeping_calls_ = 0;
  bool made_nan_ = false;  // this call's fast run: a checks_nan stage made NaN
  Graph graph_;
  std::vector<Stage> stages_;
  std::vector<std::shared_ptr<const AlignedBuffer>> constants_;  // per value; null unless XNNPACK reads it in place
  std::vector<const void*> constant_data_;                       // per value
  std::vector<bool> workspace_value_;                            // per value: lives in the workspace
  std::vector<bool> copy_out_;              // per value: external output also consumed inside, copied out at the end
  std::vector<bool> read_by_xnnpack_;       // per value: read by an XNNPACK stage (may be read past its end)
  std::vector<bool> argmax_index_;          // per value: holds uint32 indices
  std::vector<uint32_t> external_view_of_;  // per value: the delegate input whose bytes it is, or kNoValue
  std::vector<uint32_t> output_view_of_;    // per value: the delegate output whose bytes it is, or kNoValue
  WorkspaceSource workspace_;
  // Null: stages compute on the calling thread. Declared before the plans so
  // that it outlives their XNNPACK runtimes, which keep the pool.
  std::shared_ptr<ThreadPool> thread_pool_;
  std::unique_ptr<ShapePlan> declared_plan_;
  std::vector<std::unique_ptr<ShapePlan>> dynamic_plans_;
  uint64_t calls_ = 0;
  // Per-call scratch, kept to avoid allocating on every execute.
  std::vector<void*> data_;
  std::vector<size_t> signature_;
  std::vector<xnn_external_value> externals_;
};

}  // namespace etna::xnn
