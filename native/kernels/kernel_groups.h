// One registration function per kernel source file. registry.cpp calls each
// of them explicitly (static initializers would be dropped by the linker
// when the kernels live in a static library).
#pragma once

#include "core/kernel.h"

namespace etna::kernels {

void register_binary_kernels(KernelRegistry& registry);         // arithmetic, comparisons, where, masked_fill, pow
void register_unary_kernels(KernelRegistry& registry);          // math and activations
void register_reduction_kernels(KernelRegistry& registry);      // sum, mean, amax, argmax, cumsum
void register_normalization_kernels(KernelRegistry& registry);  // softmax, log_softmax, layer_norm
void register_matmul_kernels(KernelRegistry& registry);         // mm, bmm, addmm, linear
void register_convolution_kernels(KernelRegistry& registry);    // convolution (1-D, 2-D)
void register_shape_kernels(KernelRegistry& registry);          // views, permutes, cat, slice, pad, ...
void register_copy_kernels(KernelRegistry& registry);           // clone, copy, dtype/dim-order conversion
void register_indexing_kernels(KernelRegistry& registry);       // gather, scatter, index_select, embedding, index_put
void register_factory_kernels(KernelRegistry& registry);        // full, zeros, full_like, scalar_tensor, arange
void register_prim_kernels(KernelRegistry& registry);           // executorch_prim ops, sym_size, sym_numel, et_view

void register_onnx_support_kernels(KernelRegistry& registry);  // floor, ceil, round, erf (ONNX import)
void register_llm_kernels(KernelRegistry& registry);           // llama:: attention over a KV cache, cache updates
void register_hadamard_kernels(KernelRegistry& registry);      // llama::fast_hadamard_transform (SpinQuant)
void register_quantized_kernels(KernelRegistry& registry);  // quantized_decomposed:: (de)quantize, qparams, embeddings
void register_pooling_kernels(KernelRegistry& registry);    // max/avg/adaptive pooling, upsampling, batch norm

}  // namespace etna::kernels
