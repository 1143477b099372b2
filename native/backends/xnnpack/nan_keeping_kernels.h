// The delegate's NaN-keeping variant (delegate.h): fp32 nodes whose kernels in
// the linked (2022) XNNPACK turn NaN into a bound run as these instead. They
// compute as PyTorch and onnxruntime do (NaN stays NaN, the node's bounds
// are applied by output_bounds.h), plainly: they only run for calls whose
// inputs hold NaN or an infinity, so they favour clarity over speed.
#pragma once

#include <vector>

#include "backends/xnnpack/node_types.h"
#include "core/status.h"

namespace etna::xnn {

// Runs the node's NaN-keeping kernel (nan_keeping_kernel_for), as
// run_etna_kernel runs a row's etna kernel.
Status run_nan_keeping_kernel(const Graph& graph, const Node& node, const std::vector<Shape>& shapes,
                              void* const* data);

Status nan_keeping_binary_kernel(const EtnaKernelCall& call);  // add, subtract, multiply, divide, maximum, minimum
Status nan_keeping_clamp_kernel(const EtnaKernelCall& call);
Status nan_keeping_quantize_kernel(const EtnaKernelCall& call);  // Convert from fp32 to qint8 or quint8
Status nan_keeping_sigmoid_kernel(const EtnaKernelCall& call);
Status nan_keeping_softmax_kernel(const EtnaKernelCall& call);
Status nan_keeping_max_pooling_kernel(const EtnaKernelCall& call);
Status nan_keeping_average_pooling_kernel(const EtnaKernelCall& call);
Status nan_keeping_global_average_pooling_kernel(const EtnaKernelCall& call);

// What `count` floats hold besides numbers. Scanned before and after every
// fast call of a delegate that loses NaN, so it runs at memory speed (AVX2 or
// NEON when the CPU has it; float_specials_scalar is the same answer without).
struct FloatSpecials {
  bool nan = false;
  bool infinity = false;
};
FloatSpecials float_specials(const float* data, size_t count);
FloatSpecials float_specials_scalar(const float* data, size_t count);
// The kernel float_specials runs on this CPU: "avx2", "neon" or "scalar".
const char* float_specials_path();

}  // namespace etna::xnn
