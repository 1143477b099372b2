// etna's own implementations of the node types the linked (2022) XNNPACK has
// no subgraph node for: data movement (transpose, concatenate, slice, copy,
// reshape), batch matrix multiply, and fp32 elementwise math (sqrt, rsqrt, log,
// gelu, tanh, exp, sin, cos; sqrt has an XNNPACK node, but the fast variant
// checks what it makes for NaN, see node_types.h); and PReLU where XNNPACK's
// result would differ from ONNX's. They run between XNNPACK stages on the
// same buffers.
#pragma once

#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/node_types.h"
#include "core/status.h"

namespace etna::xnn {

// `data[v]` is the buffer of value v, sized for `shapes[v]`. Shapes were
// checked by infer_shapes(), so the kernel only indexes within them. Large
// kernels split their work over `threadpool` (null: the calling thread only).
Status run_etna_kernel(const Graph& graph, const Node& node, const std::vector<Shape>& shapes, void* const* data,
                       pthreadpool_t threadpool);

// The rows' run functions (node_types.cpp).
Status transpose_kernel(const EtnaKernelCall& call);
Status concatenate_kernel(const EtnaKernelCall& call);
Status slice_kernel(const EtnaKernelCall& call);
Status copy_kernel(const EtnaKernelCall& call);  // reshape and copy: the bytes as they are
Status batch_matmul_kernel(const EtnaKernelCall& call);
Status rsqrt_kernel(const EtnaKernelCall& call);  // fp32 elementwise from here on
Status sqrt_kernel(const EtnaKernelCall& call);
Status log_kernel(const EtnaKernelCall& call);
Status gelu_kernel(const EtnaKernelCall& call);
Status tanh_kernel(const EtnaKernelCall& call);
Status exp_kernel(const EtnaKernelCall& call);
Status sin_kernel(const EtnaKernelCall& call);
Status cos_kernel(const EtnaKernelCall& call);
Status prelu_kernel(const EtnaKernelCall& call);  // input 1: the slope, broadcast against input 0

}  // namespace etna::xnn
