// etna's own implementations of the node types the linked (2022) XNNPACK has
// no subgraph node for: data movement (transpose, concatenate, slice, copy,
// reshape), batch matrix multiply, and fp32 elementwise math (rsqrt, log,
// gelu, tanh, exp, sin, cos). They run between XNNPACK stages on the same
// buffers.
#pragma once

#include <vector>

#include "backends/xnnpack/graph.h"
#include "core/status.h"

namespace etna::xnn {

// `data[v]` is the buffer of value v, sized for `shapes[v]`. Shapes were
// checked by infer_shapes(), so the kernel only indexes within them.
Status run_own_kernel(const Graph& graph, const Node& node, const std::vector<Shape>& shapes, void* const* data);

}  // namespace etna::xnn
