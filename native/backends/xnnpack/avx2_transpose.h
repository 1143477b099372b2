// An 8 x 8 block of 4-byte elements transposed in AVX2 registers, shared by
// the transpose kernel and the matrix multiply's reading of transposed B.
#pragma once

#include <cstddef>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace etna::xnn {

// columns[i][j] = in[j * in_stride + i] for i, j < 8: eight rows of eight
// 4-byte elements turned in registers (unpack pairs, then quads, then swap
// 128-bit halves).
__attribute__((target("avx2"))) inline void transpose_8x8_to_registers_avx2(const float* in, size_t in_stride,
                                                                            __m256 columns[8]) {
  __m256 r[8], t[8];
  for (size_t j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(in + j * in_stride);
  for (size_t j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (size_t j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (size_t i = 0; i < 4; ++i) {
    columns[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    columns[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
}

// out[i * out_stride + j] = in[j * in_stride + i] for i, j < 8.
__attribute__((target("avx2"))) inline void transpose_8x8_avx2(const float* in, size_t in_stride, float* out,
                                                               size_t out_stride) {
  __m256 columns[8];
  transpose_8x8_to_registers_avx2(in, in_stride, columns);
  for (size_t i = 0; i < 8; ++i) _mm256_storeu_ps(out + i * out_stride, columns[i]);
}

}  // namespace etna::xnn

#endif
