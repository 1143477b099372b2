// The fp32 matrix multiply behind the XNNBatchMatrixMultiply etna kernel.
// AVX2 + FMA register tiles when the CPU has them (chosen at run time, as the
// build targets no particular CPU), NEON on arm64, portable loops otherwise.
// The AVX2 path rounds differently (fused multiply-adds); NEON gives the
// portable loops' bits. Each output is summed in k order on every path.
#pragma once

#include <cstddef>

namespace etna::xnn {

// c[m, n] = a[m, k] times b, with b stored [k, n] or, when `transposed_b`,
// [n, k]. a and c are dense row-major; b's stored rows are `b_stride`
// elements apart (n, or k when transposed, when dense), so b may be a view
// into a wider tensor (one head of a [positions, heads * head_dim] cache).
// c is overwritten.
void matmul_f32(const float* a, const float* b, size_t b_stride, float* c, size_t m, size_t k, size_t n,
                bool transposed_b);

// Rows [row_begin, row_end) and columns [col_begin, col_end) of the same
// product: what one task computes when a product is split (parallel.h).
// Every output gets the bits the whole product gives it.
void matmul_f32_part(const float* a, const float* b, size_t b_stride, float* c, size_t m, size_t k, size_t n,
                     bool transposed_b, size_t row_begin, size_t row_end, size_t col_begin, size_t col_end);

// The same with b dense.
inline void matmul_f32(const float* a, const float* b, float* c, size_t m, size_t k, size_t n, bool transposed_b) {
  matmul_f32(a, b, transposed_b ? k : n, c, m, k, n, transposed_b);
}

}  // namespace etna::xnn
