#include "backends/xnnpack/matmul_kernels.h"

#include <algorithm>
#include <vector>

#include "backends/xnnpack/avx2_transpose.h"
#include "backends/xnnpack/dot_path.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ETNA_MATMUL_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define ETNA_MATMUL_NEON 1
#endif

namespace etna::xnn {
namespace {

// b stored [n, k] (rows `b_stride` apart): c[i, j] is the dot product of rows
// i of a and j of b. Four columns at a time give four independent sums, each
// accumulated in k order.
void matmul_transposed_b_scalar(const float* a, const float* b, size_t b_stride, float* c, size_t c_stride, size_t m,
                                size_t k, size_t n) {
  for (size_t i = 0; i < m; ++i) {
    const float* a_row = a + i * k;
    float* c_row = c + i * c_stride;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float* b0 = b + j * b_stride;
      const float* b1 = b0 + b_stride;
      const float* b2 = b1 + b_stride;
      const float* b3 = b2 + b_stride;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t p = 0; p < k; ++p) {
        const float x = a_row[p];
        s0 += x * b0[p];
        s1 += x * b1[p];
        s2 += x * b2[p];
        s3 += x * b3[p];
      }
      c_row[j] = s0;
      c_row[j + 1] = s1;
      c_row[j + 2] = s2;
      c_row[j + 3] = s3;
    }
    for (; j < n; ++j) {
      const float* b_row = b + j * b_stride;
      float sum = 0;
      for (size_t p = 0; p < k; ++p) sum += a_row[p] * b_row[p];
      c_row[j] = sum;
    }
  }
}

// b stored [k, n] (rows `b_stride` apart): each row of c accumulates scaled
// rows of b so the inner loop is contiguous; four rows of a share every load
// of a row of b.
void matmul_plain_b_scalar(const float* a, const float* b, size_t b_stride, float* c, size_t c_stride, size_t m,
                           size_t k, size_t n) {
  for (size_t i = 0; i < m; ++i) std::fill(c + i * c_stride, c + i * c_stride + n, 0.0f);
  size_t i = 0;
  for (; i + 4 <= m; i += 4) {
    float* c0 = c + i * c_stride;
    float* c1 = c0 + c_stride;
    float* c2 = c1 + c_stride;
    float* c3 = c2 + c_stride;
    const float* a0 = a + i * k;
    for (size_t p = 0; p < k; ++p) {
      const float x0 = a0[p], x1 = a0[k + p], x2 = a0[2 * k + p], x3 = a0[3 * k + p];
      const float* b_row = b + p * b_stride;
      for (size_t j = 0; j < n; ++j) {
        const float y = b_row[j];
        c0[j] += x0 * y;
        c1[j] += x1 * y;
        c2[j] += x2 * y;
        c3[j] += x3 * y;
      }
    }
  }
  for (; i < m; ++i) {
    float* c_row = c + i * c_stride;
    const float* a_row = a + i * k;
    for (size_t p = 0; p < k; ++p) {
      const float x = a_row[p];
      const float* b_row = b + p * b_stride;
      for (size_t j = 0; j < n; ++j) c_row[j] += x * b_row[j];
    }
  }
}

#ifdef ETNA_MATMUL_X86

constexpr size_t kTileRows = 4;    // rows of c per register tile
constexpr size_t kVector = 8;      // floats per register
constexpr size_t kMaxVectors = 3;  // a tile is up to 4 x 24: 12 accumulators, 3 loads of b, 1 broadcast
constexpr size_t kPanelCols = kVector * kMaxVectors;

// kRows x (8 * kVectors) outputs held in registers over the whole k loop:
// per step of k, kVectors loads of b and kRows broadcasts of a feed
// kRows * kVectors fused multiply-adds. b holds 8 * kVectors readable
// columns per row (`b_stride` apart); the first `cols` results are stored.
template <size_t kRows, size_t kVectors>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* a, size_t k, const float* b, size_t b_stride, float* c,
                                                   size_t c_stride, size_t cols) {
  __m256 acc[kRows][kVectors];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVectors; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (size_t p = 0; p < k; ++p) {
    __m256 y[kVectors];
    for (size_t v = 0; v < kVectors; ++v) y[v] = _mm256_loadu_ps(b + p * b_stride + v * kVector);
    for (size_t r = 0; r < kRows; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * k + p);
      for (size_t v = 0; v < kVectors; ++v) acc[r][v] = _mm256_fmadd_ps(x, y[v], acc[r][v]);
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    float row[kVectors * kVector];
    float* c_row = c + r * c_stride;
    float* target = cols == kVectors * kVector ? c_row : row;
    for (size_t v = 0; v < kVectors; ++v) _mm256_storeu_ps(target + v * kVector, acc[r][v]);
    if (target == row) std::copy(row, row + cols, c_row);
  }
}

using TileFn = void (*)(const float*, size_t, const float*, size_t, float*, size_t, size_t);
template <size_t kRows>
constexpr TileFn kRowTiles[kMaxVectors + 1] = {nullptr, tile_avx2<kRows, 1>, tile_avx2<kRows, 2>, tile_avx2<kRows, 3>};
// kTiles[rows][vectors] for 1..4 rows and 1..3 vectors.
constexpr const TileFn* kTiles[kTileRows + 1] = {nullptr, kRowTiles<1>, kRowTiles<2>, kRowTiles<3>, kRowTiles<4>};

// c[:, 0..cols) from `block`, which has `readable` columns per row (at least
// `cols`, `b_stride` apart): chunks of 24, 16 or 8 columns, then fewer than
// 8, read from a zero-padded copy when the block has no 8 columns left.
void columns_avx2(const float* a, size_t m, size_t k, const float* block, size_t b_stride, size_t cols, size_t readable,
                  float* c, size_t c_stride, std::vector<float>& scratch) {
  for (size_t first = 0; first < cols;) {
    const size_t left = cols - first;
    // 32 columns go as 16 + 16, not 24 + 8: a lone vector's 4 sums wait on
    // each other's latency.
    const size_t whole = left / kVector;
    const size_t vectors = left < kVector ? 1 : whole == 4 ? 2 : std::min(kMaxVectors, whole);
    const size_t chunk = std::min(left, vectors * kVector);
    const float* source = block + first;
    size_t source_stride = b_stride;
    if (first + vectors * kVector > readable) {
      scratch.assign(k * kVector, 0.0f);
      for (size_t p = 0; p < k; ++p) {
        std::copy(source + p * b_stride, source + p * b_stride + chunk, &scratch[p * kVector]);
      }
      source = scratch.data();
      source_stride = kVector;
    }
    for (size_t i = 0; i < m; i += kTileRows) {
      const size_t rows = std::min(kTileRows, m - i);
      kTiles[rows][vectors](a + i * k, k, source, source_stride, c + i * c_stride + first, c_stride, chunk);
    }
    first += chunk;
  }
}

// Columns [first, first + cols) of a transposed b (rows `b_stride` apart)
// into a [k][24] panel, zero beyond the last column: 8 x 8 blocks turned in
// registers, what is left one element at a time.
__attribute__((target("avx2"))) void pack_transposed_panel_avx2(const float* b, size_t b_stride, size_t k, size_t first,
                                                                size_t cols, float* panel) {
  if (cols < kPanelCols) std::fill(panel, panel + k * kPanelCols, 0.0f);
  const size_t whole_cols = cols / kVector * kVector, whole_k = k / kVector * kVector;
  for (size_t j = 0; j < whole_cols; j += kVector) {
    const float* rows = b + (first + j) * b_stride;
    for (size_t p = 0; p < whole_k; p += kVector) {
      transpose_8x8_avx2(rows + p, b_stride, panel + p * kPanelCols + j, kPanelCols);
    }
  }
  for (size_t j = 0; j < cols; ++j) {
    const float* column = b + (first + j) * b_stride;
    for (size_t p = j < whole_cols ? whole_k : 0; p < k; ++p) panel[p * kPanelCols + j] = column[p];
  }
}

// kRows x 8 outputs of a transposed b (8 rows `b_stride` apart, k a multiple
// of 8) without packing: each 8 x 8 block of b turned in registers gives the
// 8 columns at 8 steps of k, consumed in k order like the panel tiles.
template <size_t kRows>
__attribute__((target("avx2,fma"))) void transposed_tile_avx2(const float* a, size_t k, const float* b, size_t b_stride,
                                                              float* c, size_t c_stride) {
  __m256 acc[kRows];
  for (size_t r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t p0 = 0; p0 < k; p0 += kVector) {
    __m256 y[kVector];
    transpose_8x8_to_registers_avx2(b + p0, b_stride, y);
#pragma GCC unroll 8
    for (size_t p = 0; p < kVector; ++p) {
#pragma GCC unroll 8
      for (size_t r = 0; r < kRows; ++r) {
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * k + p0 + p), y[p], acc[r]);
      }
    }
  }
  for (size_t r = 0; r < kRows; ++r) _mm256_storeu_ps(c + r * c_stride, acc[r]);
}

constexpr size_t kTransposedTileRows = 8;
using TransposedTileFn = void (*)(const float*, size_t, const float*, size_t, float*, size_t);
constexpr TransposedTileFn kTransposedTiles[kTransposedTileRows + 1] = {nullptr,
                                                                        transposed_tile_avx2<1>,
                                                                        transposed_tile_avx2<2>,
                                                                        transposed_tile_avx2<3>,
                                                                        transposed_tile_avx2<4>,
                                                                        transposed_tile_avx2<5>,
                                                                        transposed_tile_avx2<6>,
                                                                        transposed_tile_avx2<7>,
                                                                        transposed_tile_avx2<8>};

// Plain b is read in place (`readable` columns per row, at least n). Transposed b is read by 8 x 8 blocks while k
// is a multiple of 8, for whole groups of 8 columns; other columns are packed
// 24 at a time into [k][24] panels.
void matmul_avx2(const float* a, const float* b, size_t b_stride, size_t readable, float* c, size_t c_stride, size_t m,
                 size_t k, size_t n, bool transposed_b, std::vector<float>& panel, std::vector<float>& scratch) {
  if (k == 0) {  // no products: zeros, and the empty panels below have no data to index
    for (size_t i = 0; i < m; ++i) std::fill(c + i * c_stride, c + i * c_stride + n, 0.0f);
    return;
  }
  if (!transposed_b) {
    columns_avx2(a, m, k, b, b_stride, n, readable, c, c_stride, scratch);
    return;
  }
  const size_t unpacked = k % kVector == 0 ? n / kVector * kVector : 0;
  for (size_t i = 0; i < m; i += kTransposedTileRows) {
    const size_t rows = std::min(kTransposedTileRows, m - i);
    for (size_t j = 0; j < unpacked; j += kVector) {
      kTransposedTiles[rows](a + i * k, k, b + j * b_stride, b_stride, c + i * c_stride + j, c_stride);
    }
  }
  panel.resize(k * kPanelCols);
  for (size_t first = unpacked; first < n; first += kPanelCols) {
    const size_t cols = std::min(kPanelCols, n - first);
    pack_transposed_panel_avx2(b, b_stride, k, first, cols, panel.data());
    columns_avx2(a, m, k, panel.data(), kPanelCols, cols, kPanelCols, c + first, c_stride, scratch);
  }
}

#endif  // ETNA_MATMUL_X86

#ifdef ETNA_MATMUL_NEON

// The portable loops on NEON, with their bits: lanes run over output columns,
// and each output is the same chain of separate multiplies and adds in k
// order, from 0 (the build does not fuse them).

// matmul_transposed_b_scalar: four columns (rows of b) a vector, their
// elements turned into lanes by 4 x 4 transposes; kRows rows of a share each
// transpose.
template <size_t kRows>
void transposed_rows_neon(const float* a, size_t k, const float* b, size_t b_stride, float* c, size_t c_stride,
                          size_t n) {
  const size_t whole_k = k / 4 * 4;
  size_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* b0 = b + j * b_stride;
    float32x4_t sums[kRows];
    for (size_t r = 0; r < kRows; ++r) sums[r] = vdupq_n_f32(0.0f);
    for (size_t p = 0; p < whole_k; p += 4) {
      const float32x4_t r0 = vld1q_f32(b0 + p), r1 = vld1q_f32(b0 + b_stride + p);
      const float32x4_t r2 = vld1q_f32(b0 + 2 * b_stride + p), r3 = vld1q_f32(b0 + 3 * b_stride + p);
      const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1)), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
      const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3)), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
      // column[l]: element p + l of the four rows of b.
      const float32x4_t column[4] = {
          vreinterpretq_f32_f64(vzip1q_f64(t0, t2)), vreinterpretq_f32_f64(vzip1q_f64(t1, t3)),
          vreinterpretq_f32_f64(vzip2q_f64(t0, t2)), vreinterpretq_f32_f64(vzip2q_f64(t1, t3))};
      for (size_t r = 0; r < kRows; ++r) {
        const float* x = a + r * k + p;
        for (size_t l = 0; l < 4; ++l) sums[r] = vaddq_f32(sums[r], vmulq_n_f32(column[l], x[l]));
      }
    }
    for (size_t r = 0; r < kRows; ++r) {
      float lanes[4];
      vst1q_f32(lanes, sums[r]);
      const float* a_row = a + r * k;
      for (size_t p = whole_k; p < k; ++p) {
        for (size_t l = 0; l < 4; ++l) lanes[l] += a_row[p] * b0[l * b_stride + p];
      }
      std::copy(lanes, lanes + 4, c + r * c_stride + j);
    }
  }
  for (; j < n; ++j) {
    const float* b_row = b + j * b_stride;
    for (size_t r = 0; r < kRows; ++r) {
      const float* a_row = a + r * k;
      float sum = 0;
      for (size_t p = 0; p < k; ++p) sum += a_row[p] * b_row[p];
      c[r * c_stride + j] = sum;
    }
  }
}

// matmul_plain_b_scalar: sixteen (then four) columns of kRows rows held in
// registers over the whole k loop.
template <size_t kRows>
void plain_rows_neon(const float* a, size_t k, const float* b, size_t b_stride, float* c, size_t c_stride, size_t n) {
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    float32x4_t sums[kRows][4];
    for (auto& row : sums) row[0] = row[1] = row[2] = row[3] = vdupq_n_f32(0.0f);
    for (size_t p = 0; p < k; ++p) {
      const float* b_row = b + p * b_stride + j;
      const float32x4_t y[4] = {vld1q_f32(b_row), vld1q_f32(b_row + 4), vld1q_f32(b_row + 8), vld1q_f32(b_row + 12)};
      for (size_t r = 0; r < kRows; ++r) {
        const float x = a[r * k + p];
        for (size_t v = 0; v < 4; ++v) sums[r][v] = vaddq_f32(sums[r][v], vmulq_n_f32(y[v], x));
      }
    }
    for (size_t r = 0; r < kRows; ++r) {
      for (size_t v = 0; v < 4; ++v) vst1q_f32(c + r * c_stride + j + 4 * v, sums[r][v]);
    }
  }
  for (; j + 4 <= n; j += 4) {
    float32x4_t sums[kRows];
    for (size_t r = 0; r < kRows; ++r) sums[r] = vdupq_n_f32(0.0f);
    for (size_t p = 0; p < k; ++p) {
      const float32x4_t y = vld1q_f32(b + p * b_stride + j);
      for (size_t r = 0; r < kRows; ++r) sums[r] = vaddq_f32(sums[r], vmulq_n_f32(y, a[r * k + p]));
    }
    for (size_t r = 0; r < kRows; ++r) vst1q_f32(c + r * c_stride + j, sums[r]);
  }
  for (; j < n; ++j) {
    for (size_t r = 0; r < kRows; ++r) {
      float sum = 0;
      for (size_t p = 0; p < k; ++p) sum += a[r * k + p] * b[p * b_stride + j];
      c[r * c_stride + j] = sum;
    }
  }
}

void matmul_neon(const float* a, const float* b, size_t b_stride, float* c, size_t c_stride, size_t m, size_t k,
                 size_t n, bool transposed_b) {
  const auto rows4 = transposed_b ? transposed_rows_neon<4> : plain_rows_neon<4>;
  const auto rows1 = transposed_b ? transposed_rows_neon<1> : plain_rows_neon<1>;
  size_t i = 0;
  for (; i + 4 <= m; i += 4) rows4(a + i * k, k, b, b_stride, c + i * c_stride, c_stride, n);
  for (; i < m; ++i) rows1(a + i * k, k, b, b_stride, c + i * c_stride, c_stride, n);
}

#endif  // ETNA_MATMUL_NEON

}  // namespace

void matmul_f32_part(const float* a, const float* b, size_t b_stride, float* c, size_t m, size_t k, size_t n,
                     bool transposed_b, size_t row_begin, size_t row_end, size_t col_begin, size_t col_end) {
  row_end = std::min(row_end, m);
  col_end = std::min(col_end, n);
  if (row_begin >= row_end || col_begin >= col_end) return;
  const size_t rows = row_end - row_begin, cols = col_end - col_begin;
  a += row_begin * k;
  c += row_begin * n + col_begin;
  b += transposed_b ? col_begin * b_stride : col_begin;
#ifdef ETNA_MATMUL_X86
  if (path_has_avx2(active_dot_path())) {
    // Per thread: delegates of different sessions, and tasks of one product,
    // may run at once.
    thread_local std::vector<float> panel, scratch;
    matmul_avx2(a, b, b_stride, n - col_begin, c, n, rows, k, cols, transposed_b, panel, scratch);
    return;
  }
#elif defined(ETNA_MATMUL_NEON)
  if (path_has_neon(active_dot_path())) {
    matmul_neon(a, b, b_stride, c, n, rows, k, cols, transposed_b);
    return;
  }
#endif
  if (transposed_b) {
    matmul_transposed_b_scalar(a, b, b_stride, c, n, rows, k, cols);
  } else {
    matmul_plain_b_scalar(a, b, b_stride, c, n, rows, k, cols);
  }
}

void matmul_f32(const float* a, const float* b, size_t b_stride, float* c, size_t m, size_t k, size_t n,
                bool transposed_b) {
  matmul_f32_part(a, b, b_stride, c, m, k, n, transposed_b, 0, m, 0, n);
}

}  // namespace etna::xnn
