#include "kernels/registry.h"

#include "kernels/kernel_groups.h"

namespace etna::kernels {

void add_portable_kernels(KernelRegistry& registry) {
  register_binary_kernels(registry);
  register_unary_kernels(registry);
  register_reduction_kernels(registry);
  register_normalization_kernels(registry);
  register_matmul_kernels(registry);
  register_convolution_kernels(registry);
  register_shape_kernels(registry);
  register_copy_kernels(registry);
  register_indexing_kernels(registry);
  register_factory_kernels(registry);
  register_prim_kernels(registry);
  register_onnx_support_kernels(registry);
  register_llm_kernels(registry);
  register_hadamard_kernels(registry);
  register_quantized_kernels(registry);
  register_pooling_kernels(registry);
}

void register_portable_kernels() { register_kernels(add_portable_kernels); }

}  // namespace etna::kernels
