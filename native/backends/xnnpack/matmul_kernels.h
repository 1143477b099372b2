// The fp32 matrix multiply behind the XNNBatchMatrixMultiply own kernel.
// AVX2 + FMA register tiles when the CPU has them (chosen at run time, as the
// build targets no particular CPU), portable loops otherwise. Paths may round
// differently (fused multiply-adds) but each output is summed in k order.
#pragma once

#include <cstddef>

namespace etna::xnn {

// c[m, n] = a[m, k] times b, with b stored [k, n] or, when `transposed_b`,
// [n, k]. All three are dense row-major; c is overwritten.
void matmul_f32(const float* a, const float* b, float* c, size_t m, size_t k, size_t n, bool transposed_b);

}  // namespace etna::xnn
