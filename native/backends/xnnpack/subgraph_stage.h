// A run of consecutive nodes that the linked XNNPACK has subgraph nodes for,
// built into one XNNPACK runtime per shape plan.
//
// Every non-constant value a stage touches is an external value of its
// subgraph (inputs flagged 0x1, values the stage produces flagged 0x2), so
// XNNPACK keeps no activation memory of its own: intermediates live in the
// delegate's workspace, which the module may share.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/xnn_library.h"
#include "core/status.h"

namespace etna::xnn {

struct SubgraphStage {
  std::vector<size_t> nodes;
  std::vector<uint32_t> externals;  // value index of stage-local external id k
  std::vector<bool> produced_here;  // per external: written by this stage
};

// Lists the stage's external values (in first-use order).
void collect_stage_externals(const Graph& graph, SubgraphStage& stage);

struct StageRuntime {
  RuntimePtr runtime;
};

// Defines the stage's values and nodes at `shapes` and creates the runtime.
// constant_data[v] is the padded copy of constant value v.
Result<StageRuntime> build_stage_runtime(const Graph& graph, const SubgraphStage& stage,
                                         const std::vector<Shape>& shapes,
                                         const std::vector<const void*>& constant_data, pthreadpool_t threadpool);

}  // namespace etna::xnn
