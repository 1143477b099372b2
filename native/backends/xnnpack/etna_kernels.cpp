#include "backends/xnnpack/etna_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "backends/xnnpack/avx2_transpose.h"
#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/matmul_kernels.h"
#include "backends/xnnpack/node_types.h"
#include "backends/xnnpack/parallel.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ETNA_KERNELS_X86 1
#elif defined(__aarch64__)
#include <arm_neon.h>
#define ETNA_KERNELS_NEON 1
#endif

namespace etna::xnn {
namespace {

// Row-major strides in elements.
void contiguous_strides(const Shape& shape, size_t* strides) {
  size_t stride = 1;
  for (size_t d = shape.rank; d-- > 0;) {
    strides[d] = stride;
    stride *= shape.dims[d];
  }
}

// index[d] for d < dims (all but the innermost dim when called with rank - 1)
// of the `flat`-th position in row-major order over `shape`.
void unravel(size_t flat, const Shape& shape, size_t dims, size_t* index) {
  for (size_t d = dims; d-- > 0;) {
    index[d] = flat % shape.dims[d];
    flat /= shape.dims[d];
  }
}

// fn(first, end) over runs of [0, rows) covering them all once, split over
// `threadpool` when the rows hold enough bytes (parallel.h).
template <typename Fn>
void for_row_runs(pthreadpool_t threadpool, size_t rows, size_t row_bytes, const Fn& fn) {
  const size_t tasks = std::min(rows, task_count(threadpool, rows * row_bytes, kMinTaskBytes));
  const size_t per_task = block_size(rows, tasks, 1);
  parallel_for(pool_for(threadpool, tasks), divide_up(rows, per_task),
               [&](size_t task) { fn(task * per_task, std::min(rows, (task + 1) * per_task)); });
}

#ifdef ETNA_KERNELS_X86

// The whole 8 x 8 tiles of out[i * out_stride + j] = in[j * in_stride + i]
// (i < rows, j < cols); returns how many rows and columns they cover.
__attribute__((target("avx2"))) std::pair<size_t, size_t> transpose_tiles_avx2(const float* in, size_t in_stride,
                                                                               float* out, size_t out_stride,
                                                                               size_t rows, size_t cols) {
  const size_t whole_rows = rows / 8 * 8, whole_cols = cols / 8 * 8;
  for (size_t i = 0; i < whole_rows; i += 8) {
    for (size_t j = 0; j < whole_cols; j += 8) {
      transpose_8x8_avx2(in + j * in_stride + i, in_stride, out + i * out_stride + j, out_stride);
    }
  }
  return {whole_rows, whole_cols};
}

// out[3 * i + j] = columns[j][i] for i < count / 8 * 8 (three planes of an
// image into pixels): each 8 outputs gather the same lanes of all three
// planes, then take every third lane from each. Returns the pixels done.
__attribute__((target("avx2"))) size_t interleave3_avx2(const float* const columns[3], float* out, size_t count) {
  const __m256i lanes[3] = {_mm256_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2), _mm256_setr_epi32(2, 3, 3, 3, 4, 4, 4, 5),
                            _mm256_setr_epi32(5, 5, 6, 6, 6, 7, 7, 7)};
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 a = _mm256_loadu_ps(columns[0] + i), b = _mm256_loadu_ps(columns[1] + i),
                 c = _mm256_loadu_ps(columns[2] + i);
    // Output vector v holds plane (8v + lane) % 3 at each lane.
    const __m256 from_a[3] = {_mm256_permutevar8x32_ps(a, lanes[0]), _mm256_permutevar8x32_ps(a, lanes[1]),
                              _mm256_permutevar8x32_ps(a, lanes[2])};
    const __m256 from_b[3] = {_mm256_permutevar8x32_ps(b, lanes[0]), _mm256_permutevar8x32_ps(b, lanes[1]),
                              _mm256_permutevar8x32_ps(b, lanes[2])};
    const __m256 from_c[3] = {_mm256_permutevar8x32_ps(c, lanes[0]), _mm256_permutevar8x32_ps(c, lanes[1]),
                              _mm256_permutevar8x32_ps(c, lanes[2])};
    float* target = out + 3 * i;
    _mm256_storeu_ps(target, _mm256_blend_ps(_mm256_blend_ps(from_a[0], from_b[0], 0x92), from_c[0], 0x24));
    _mm256_storeu_ps(target + 8, _mm256_blend_ps(_mm256_blend_ps(from_a[1], from_b[1], 0x24), from_c[1], 0x49));
    _mm256_storeu_ps(target + 16, _mm256_blend_ps(_mm256_blend_ps(from_a[2], from_b[2], 0x49), from_c[2], 0x92));
  }
  return i;
}

#endif  // ETNA_KERNELS_X86

#ifdef ETNA_KERNELS_NEON

// The whole 4 x 4 tiles of out[i * out_stride + j] = in[j * in_stride + i]
// (i < rows, j < cols), in NEON registers (transpose pairs of lanes, then
// pairs of halves); returns how many rows and columns they cover.
std::pair<size_t, size_t> transpose_tiles_neon(const float* in, size_t in_stride, float* out, size_t out_stride,
                                               size_t rows, size_t cols) {
  const size_t whole_rows = rows / 4 * 4, whole_cols = cols / 4 * 4;
  for (size_t i = 0; i < whole_rows; i += 4) {
    for (size_t j = 0; j < whole_cols; j += 4) {
      const float* from = in + j * in_stride + i;
      const float32x4_t r0 = vld1q_f32(from), r1 = vld1q_f32(from + in_stride);
      const float32x4_t r2 = vld1q_f32(from + 2 * in_stride), r3 = vld1q_f32(from + 3 * in_stride);
      const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1)), t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
      const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3)), t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
      float* to = out + i * out_stride + j;
      vst1q_f32(to, vreinterpretq_f32_f64(vzip1q_f64(t0, t2)));
      vst1q_f32(to + out_stride, vreinterpretq_f32_f64(vzip1q_f64(t1, t3)));
      vst1q_f32(to + 2 * out_stride, vreinterpretq_f32_f64(vzip2q_f64(t0, t2)));
      vst1q_f32(to + 3 * out_stride, vreinterpretq_f32_f64(vzip2q_f64(t1, t3)));
    }
  }
  return {whole_rows, whole_cols};
}

// out[3 * i + j] = columns[j][i] for i < count / 4 * 4: three planes of an
// image into pixels, 4 at a time by NEON's interleaving store. Returns the
// pixels done.
size_t interleave3_neon(const float* const columns[3], float* out, size_t count) {
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const float32x4x3_t pixels = {{vld1q_f32(columns[0] + i), vld1q_f32(columns[1] + i), vld1q_f32(columns[2] + i)}};
    vst3q_f32(out + 3 * i, pixels);
  }
  return i;
}

#endif  // ETNA_KERNELS_NEON

// Moves 2-D tiles: rows along the output dim whose input stride is smallest
// (the input's contiguous dim), columns along the output's innermost dim, so
// reads and writes both stay within a few cache lines per tile. When that
// input dim is contiguous (stride 1), 4-byte elements move as 8 x 8 register
// tiles with AVX2 (4 x 4 with NEON), and few columns (an NCHW image of 3 channels to NHWC) as
// one strided pass per column. Large transposes split their blocks (and the
// rows of each, in whole tiles) over the pool.
template <typename Element>
void transpose_elements(const Element* input, Element* output, const Shape& out_shape, const size_t* in_strides_by_out,
                        pthreadpool_t threadpool) {
  constexpr size_t kTile = 16;
  constexpr size_t kFewColumns = 8;
  const size_t rank = out_shape.rank;
  size_t out_strides[kMaxRank];
  contiguous_strides(out_shape, out_strides);
  size_t row_dim = 0;
  for (size_t d = 1; d + 1 < rank; ++d) {
    if (in_strides_by_out[d] < in_strides_by_out[row_dim]) row_dim = d;
  }
  const size_t rows = out_shape.dims[row_dim];
  const size_t cols = out_shape.dims[rank - 1];
  const size_t row_in = in_strides_by_out[row_dim];
  const size_t col_in = in_strides_by_out[rank - 1];
  const size_t row_out = out_strides[row_dim];
#ifdef ETNA_KERNELS_X86
  const bool tiles_in_registers = sizeof(Element) == 4 && row_in == 1 && path_has_avx2(active_dot_path());
#elif defined(ETNA_KERNELS_NEON)
  const bool tiles_in_registers = sizeof(Element) == 4 && row_in == 1 && path_has_neon(active_dot_path());
#endif
  // The dims other than row_dim and the innermost, as a shape to count blocks in.
  Shape block_shape;
  block_shape.rank = rank - 1;
  for (size_t d = 0; d + 1 < rank; ++d) block_shape.dims[d] = d == row_dim ? 1 : out_shape.dims[d];
  const size_t blocks = out_shape.numel() / (rows * cols);
  const size_t tasks = task_count(threadpool, out_shape.numel() * sizeof(Element), kMinTaskBytes);
  // Whole blocks per task when there are enough of them, else runs of rows.
  const size_t row_runs = tasks > blocks ? std::min(divide_up(tasks, blocks), divide_up(rows, kTile)) : 1;
  const size_t run_rows = block_size(rows, row_runs, kTile);
  parallel_for_2d(pool_for(threadpool, tasks), blocks, divide_up(rows, run_rows), [&](size_t block, size_t run) {
    size_t index[kMaxRank] = {};
    unravel(block, block_shape, rank - 1, index);
    size_t source = 0;
    size_t target = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      source += index[d] * in_strides_by_out[d];
      target += index[d] * out_strides[d];
    }
    const size_t first_row = run * run_rows;
    const size_t run_count = std::min(rows, first_row + run_rows) - first_row;
    // This run's rows as a block of their own.
    const Element* in_block = input + source + first_row * row_in;
    Element* out_block = output + target + first_row * row_out;
    if (row_in == 1 && cols < kFewColumns) {
      size_t done = 0;
#ifdef ETNA_KERNELS_X86
      if (tiles_in_registers && cols == 3 && row_out == 3) {
        const float* planes[3] = {reinterpret_cast<const float*>(in_block),
                                  reinterpret_cast<const float*>(in_block + col_in),
                                  reinterpret_cast<const float*>(in_block + 2 * col_in)};
        done = interleave3_avx2(planes, reinterpret_cast<float*>(out_block), run_count);
      }
#elif defined(ETNA_KERNELS_NEON)
      if (tiles_in_registers && cols == 3 && row_out == 3) {
        const float* planes[3] = {reinterpret_cast<const float*>(in_block),
                                  reinterpret_cast<const float*>(in_block + col_in),
                                  reinterpret_cast<const float*>(in_block + 2 * col_in)};
        done = interleave3_neon(planes, reinterpret_cast<float*>(out_block), run_count);
      }
#endif
      for (size_t j = 0; j < cols; ++j) {
        const Element* column = in_block + j * col_in;
        Element* out_column = out_block + j;
        for (size_t i = done; i < run_count; ++i) out_column[i * row_out] = column[i];
      }
    } else {
      size_t done_rows = 0, done_cols = 0;
#ifdef ETNA_KERNELS_X86
      if (tiles_in_registers) {
        std::tie(done_rows, done_cols) =
            transpose_tiles_avx2(reinterpret_cast<const float*>(in_block), col_in, reinterpret_cast<float*>(out_block),
                                 row_out, run_count, cols);
      }
#elif defined(ETNA_KERNELS_NEON)
      if (tiles_in_registers) {
        std::tie(done_rows, done_cols) =
            transpose_tiles_neon(reinterpret_cast<const float*>(in_block), col_in, reinterpret_cast<float*>(out_block),
                                 row_out, run_count, cols);
      }
#endif
      // What the register tiles left: the last rows, and the last columns of the others.
      for (size_t r0 = 0; r0 < run_count; r0 += kTile) {
        const size_t r1 = std::min(run_count, r0 + kTile);
        for (size_t c0 = 0; c0 < cols; c0 += kTile) {
          const size_t c1 = std::min(cols, c0 + kTile);
          for (size_t i = r0; i < r1; ++i) {
            Element* out_row = out_block + i * row_out;
            const Element* in_row = in_block + i * row_in;
            for (size_t j = i < done_rows ? std::max(c0, done_cols) : c0; j < c1; ++j) out_row[j] = in_row[j * col_in];
          }
        }
      }
    }
  });
}

constexpr size_t kSmallRowChunk = 16;  // bytes
constexpr size_t kSmallRowBytes = 128;

template <size_t kBytes>
void copy_fixed_rows(uint8_t* target, size_t target_step, const uint8_t* source, size_t source_step, size_t count) {
  for (size_t i = 0; i < count; ++i) std::memcpy(target + i * target_step, source + i * source_step, kBytes);
}

// Copies `count` rows of `bytes` each, row i from source + i * source_step to
// target + i * target_step. The row size is looked at once per run: short rows
// (one element of an interleaved pair, the channels of a pixel, a head's
// slice of a position) move as fixed-size copies the compiler inlines, where
// a library memcpy call per row costs more than the row's bytes.
void copy_strided_rows(uint8_t* target, size_t target_step, const uint8_t* source, size_t source_step, size_t count,
                       size_t bytes) {
  switch (bytes) {
    case 0: return;
    case 1: return copy_fixed_rows<1>(target, target_step, source, source_step, count);
    case 2: return copy_fixed_rows<2>(target, target_step, source, source_step, count);
    case 4: return copy_fixed_rows<4>(target, target_step, source, source_step, count);
    case 8: return copy_fixed_rows<8>(target, target_step, source, source_step, count);
    default: break;
  }
  const bool chunks = bytes % kSmallRowChunk == 0 && bytes <= kSmallRowBytes;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* to = target + i * target_step;
    const uint8_t* from = source + i * source_step;
    if (chunks) {
      for (size_t b = 0; b < bytes; b += kSmallRowChunk) std::memcpy(to + b, from + b, kSmallRowChunk);
    } else {
      std::memcpy(to, from, bytes);
    }
  }
}

// Fills each row of the output (its last dim, contiguous) from the input: the
// row at output index (i_0, .., i_{rank-2}) starts at input element
// `base + sum of i_d * strides[d]`, its elements contiguous there too. The
// rows along the next-to-last dim are a constant stride apart, so they go to
// copy_strided_rows together.
void copy_rows(const uint8_t* input, size_t base, const size_t* strides, uint8_t* output, const Shape& out_shape,
               size_t element_size, pthreadpool_t threadpool) {
  const size_t rank = out_shape.rank;
  const size_t run = out_shape.dims[rank - 1] * element_size;
  const size_t rows = out_shape.numel() / out_shape.dims[rank - 1];
  const size_t inner = rank >= 2 ? out_shape.dims[rank - 2] : 1;
  const size_t inner_step = rank >= 2 ? strides[rank - 2] * element_size : 0;
  for_row_runs(threadpool, rows, run, [&](size_t first, size_t end) {
    size_t index[kMaxRank] = {};
    unravel(first, out_shape, rank - 1, index);
    uint8_t* target = output + first * run;
    for (size_t row = first; row < end;) {
      size_t source = base;
      for (size_t d = 0; d + 1 < rank; ++d) source += index[d] * strides[d];
      const size_t at = rank >= 2 ? index[rank - 2] : 0;
      const size_t count = std::min(inner - at, end - row);
      copy_strided_rows(target, run, input + source * element_size, inner_step, count, run);
      target += count * run;
      row += count;
      if (rank < 2 || (index[rank - 2] = at + count) < inner) continue;
      index[rank - 2] = 0;
      for (size_t d = rank - 2; d-- > 0;) {
        if (++index[d] < out_shape.dims[d]) break;
        index[d] = 0;
      }
    }
  });
}

// A movement node's one input and one output; `done` when the output is
// empty or a scalar, whose one element is copied here.
struct Movement {
  const Shape& in_shape;
  const Shape& out_shape;
  const uint8_t* input;
  uint8_t* output;
  bool done;
};

Movement movement(const Node& node, const std::vector<Shape>& shapes, void* const* data, size_t element_size) {
  Movement m{shapes[node.inputs[0]], shapes[node.outputs[0]], static_cast<const uint8_t*>(data[node.inputs[0]]),
             static_cast<uint8_t*>(data[node.outputs[0]]), false};
  if (m.out_shape.numel() == 0) {
    m.done = true;
  } else if (m.out_shape.rank == 0) {
    std::memcpy(m.output, m.input, element_size);
    m.done = true;
  }
  return m;
}

Status transpose(const Node& node, const std::vector<Shape>& shapes, void* const* data, size_t element_size,
                 pthreadpool_t threadpool) {
  const auto [in_shape, out_shape, input, output, done] = movement(node, shapes, data, element_size);
  if (done) return Status::ok();
  size_t in_strides[kMaxRank];
  contiguous_strides(in_shape, in_strides);
  size_t by_out[kMaxRank];
  for (size_t i = 0; i < out_shape.rank; ++i) by_out[i] = in_strides[node.perm[i]];

  // When the innermost dim stays innermost, copy contiguous runs.
  if (node.perm[out_shape.rank - 1] == out_shape.rank - 1) {
    copy_rows(input, 0, by_out, output, out_shape, element_size, threadpool);
    return Status::ok();
  }
  switch (element_size) {
    case 1: transpose_elements(input, output, out_shape, by_out, threadpool); break;
    case 2:
      transpose_elements(reinterpret_cast<const uint16_t*>(input), reinterpret_cast<uint16_t*>(output), out_shape,
                         by_out, threadpool);
      break;
    case 4:
      transpose_elements(reinterpret_cast<const uint32_t*>(input), reinterpret_cast<uint32_t*>(output), out_shape,
                         by_out, threadpool);
      break;
    default:
      return make_error(ErrorCode::kInternal, node.describe() + ": element size " + std::to_string(element_size));
  }
  return Status::ok();
}

void concatenate(const Node& node, const std::vector<Shape>& shapes, void* const* data, size_t element_size,
                 pthreadpool_t threadpool) {
  const Shape& out_shape = shapes[node.outputs[0]];
  size_t outer = 1;
  for (size_t d = 0; d < node.axis; ++d) outer *= out_shape.dims[d];
  size_t out_row = element_size;
  for (size_t d = node.axis; d < out_shape.rank; ++d) out_row *= out_shape.dims[d];
  uint8_t* output = static_cast<uint8_t*>(data[node.outputs[0]]);
  for_row_runs(threadpool, outer, out_row, [&](size_t first, size_t end) {
    size_t column = 0;
    for (uint32_t input_index : node.inputs) {
      const Shape& shape = shapes[input_index];
      size_t row = element_size;
      for (size_t d = node.axis; d < shape.rank; ++d) row *= shape.dims[d];
      const uint8_t* input = static_cast<const uint8_t*>(data[input_index]);
      copy_strided_rows(output + first * out_row + column, out_row, input + first * row, row, end - first, row);
      column += row;
    }
  });
}

void slice(const Node& node, const std::vector<Shape>& shapes, void* const* data, size_t element_size,
           pthreadpool_t threadpool) {
  const auto [in_shape, out_shape, input, output, done] = movement(node, shapes, data, element_size);
  if (done) return;
  size_t in_strides[kMaxRank];
  contiguous_strides(in_shape, in_strides);
  size_t base = 0;
  for (size_t d = 0; d < out_shape.rank; ++d) base += node.offsets[d] * in_strides[d];
  copy_rows(input, base, in_strides, output, out_shape, element_size, threadpool);
}

// B may be read through a permutation (node.b_perm, a transpose the delegate
// folded in, see fold_transposes_into_matmuls): its element strides are then
// the source's, permuted, and the matrix whose rows are contiguous is
// multiplied in place, plain or as transposed B, with its rows' stride.
// Whole products go to tasks while there are enough of them, then runs of
// 8 rows (the transposed register tile), then of 24 columns (the widest one).
void batch_matmul(const Node& node, const std::vector<Shape>& shapes, void* const* data, pthreadpool_t threadpool) {
  const Shape& a_shape = shapes[node.inputs[0]];
  const Shape& b_source = shapes[node.inputs[1]];
  const Shape& out_shape = shapes[node.outputs[0]];
  const size_t r = a_shape.rank;
  const size_t m = a_shape.dims[r - 2];
  const size_t k = a_shape.dims[r - 1];
  const size_t n = out_shape.dims[r - 1];
  size_t source_strides[kMaxRank];
  contiguous_strides(b_source, source_strides);
  size_t b_strides[kMaxRank];  // by the dims of B as the product sees it
  for (size_t d = 0; d < r; ++d) {
    b_strides[d] = node.b_perm.empty() ? source_strides[d] : source_strides[node.b_perm[d]];
  }
  const bool stored_transposed = node.flags & 0x1;
  const size_t k_stride = b_strides[stored_transposed ? r - 1 : r - 2];
  const size_t n_stride = b_strides[stored_transposed ? r - 2 : r - 1];
  // The fold only accepts permutations keeping one of the two contiguous.
  const bool transposed = n_stride != 1 && k_stride == 1;
  const size_t b_row_stride = transposed ? n_stride : k_stride;
  const float* a = static_cast<const float*>(data[node.inputs[0]]);
  const float* b = static_cast<const float*>(data[node.inputs[1]]);
  float* c = static_cast<float*>(data[node.outputs[0]]);
  size_t batches = 1;
  for (size_t d = 0; d + 2 < r; ++d) batches *= a_shape.dims[d];
  constexpr size_t kRowUnit = 8, kColumnUnit = 24;
  const size_t tasks = task_count(threadpool, batches * m * n * k, kMinTaskFloatMacs);
  size_t row_runs = 1, column_runs = 1;
  if (tasks > batches) row_runs = std::min(divide_up(tasks, batches), divide_up(m, kRowUnit));
  if (tasks > batches * row_runs)
    column_runs = std::min(divide_up(tasks, batches * row_runs), divide_up(n, kColumnUnit));
  const size_t run_rows = block_size(m, row_runs, kRowUnit), run_columns = block_size(n, column_runs, kColumnUnit);
  row_runs = divide_up(m, run_rows);
  column_runs = divide_up(n, run_columns);
  parallel_for_2d(pool_for(threadpool, tasks), batches, row_runs * column_runs, [&](size_t batch, size_t tile) {
    size_t index[kMaxRank] = {};
    unravel(batch, a_shape, r - 2, index);
    size_t b_offset = 0;
    for (size_t d = 0; d + 2 < r; ++d) b_offset += index[d] * b_strides[d];
    const size_t row = tile / column_runs * run_rows, column = tile % column_runs * run_columns;
    matmul_f32_part(a + batch * m * k, b + b_offset, b_row_stride, c + batch * m * n, m, k, n, transposed, row,
                    std::min(m, row + run_rows), column, std::min(n, column + run_columns));
  });
}

// fp32 in, fp32 out, element by element.
template <typename Fn>
Status map_floats(const EtnaKernelCall& call, Fn fn) {
  const size_t count = call.shapes[call.node.outputs[0]].numel();
  const float* input = static_cast<const float*>(call.data[call.node.inputs[0]]);
  float* output = static_cast<float*>(call.data[call.node.outputs[0]]);
  for (size_t i = 0; i < count; ++i) output[i] = fn(input[i]);
  return Status::ok();
}

float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

#ifdef ETNA_KERNELS_X86

// e^y for y <= 0 (clamped at -87, above float's smallest normal): y = n ln2
// + r with ln2 split in two for an exact n ln2, e^r (|r| <= ln2/2) by its
// degree-6 Taylor polynomial, 2^n built in the exponent bits.
__attribute__((target("avx2,fma"))) inline __m256 exp_nonpositive_avx2(__m256 y) {
  y = _mm256_max_ps(y, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), y);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  for (const float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) {
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  }
  const __m256i two_to_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_to_n));
}

// GELU with erf by Abramowitz and Stegun's 7.1.26 (absolute error below
// 1.5e-7), odd in its argument: within 3e-7 of the exact form (relative, or
// absolute below 1), 8 lanes at once.
__attribute__((target("avx2,fma"))) void gelu_avx2(const float* input, float* output, size_t count) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(input + i);
    const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
    const __m256 magnitude = _mm256_andnot_ps(sign_bit, z);
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(magnitude, _mm256_set1_ps(0.3275911f), one));
    __m256 q = _mm256_set1_ps(1.061405429f);
    for (const float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f}) {
      q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(c));
    }
    q = _mm256_mul_ps(q, t);
    const __m256 tail = exp_nonpositive_avx2(_mm256_xor_ps(_mm256_mul_ps(magnitude, magnitude), sign_bit));
    const __m256 erf = _mm256_or_ps(_mm256_fnmadd_ps(q, tail, one), _mm256_and_ps(z, sign_bit));
    _mm256_storeu_ps(output + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, erf)));
  }
  for (; i < count; ++i) output[i] = gelu(input[i]);
}

// e^y for -110 <= y <= 90 in double, 4 lanes: y = n ln2 + r (ln2 split in
// two, |r| <= ln2/2), e^r by its degree-11 Taylor polynomial (relative error
// below 1e-15), 2^n written into the exponent bits. n is rounded by adding
// 1.5 * 2^52, which leaves it in the low bits of the sum.
__attribute__((target("avx2,fma"))) inline __m256d exp_double_avx2(__m256d y) {
  const __m256d shifter = _mm256_set1_pd(6755399441055744.0);
  const __m256d shifted = _mm256_fmadd_pd(y, _mm256_set1_pd(1.4426950408889634), shifter);
  const __m256d n = _mm256_sub_pd(shifted, shifter);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), y);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  __m256d p = _mm256_set1_pd(1.0 / 39916800);
  for (const double c :
       {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0}) {
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c));
  }
  const __m256i two_to_n =
      _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(shifted), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(two_to_n));
}

// tanh(|x|) = (e - 1) / (e + 1) with e = e^(2|x|) in double, which keeps the
// float result within 1 ulp: for |x| >= 2^-12 the subtraction loses at most
// 12 of double's 53 bits. Below that tanh(x) rounds to x itself (also
// keeping -0); |x| is capped at 20, where tanh is 1 in float (infinities
// too). NaN passes through every step: the cap takes the NaN operand.
__attribute__((target("avx2,fma"))) inline __m128 tanh_half_avx2(__m128 magnitude) {
  const __m256d a = _mm256_min_pd(_mm256_set1_pd(20.0), _mm256_cvtps_pd(magnitude));
  const __m256d e = exp_double_avx2(_mm256_add_pd(a, a));
  const __m256d one = _mm256_set1_pd(1.0);
  return _mm256_cvtpd_ps(_mm256_div_pd(_mm256_sub_pd(e, one), _mm256_add_pd(e, one)));
}

__attribute__((target("avx2,fma"))) void tanh_avx2(const float* input, float* output, size_t count) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(input + i);
    const __m256 magnitude = _mm256_andnot_ps(sign_bit, x);
    const __m256 t = _mm256_set_m128(tanh_half_avx2(_mm256_extractf128_ps(magnitude, 1)),
                                     tanh_half_avx2(_mm256_castps256_ps128(magnitude)));
    const __m256 tiny = _mm256_cmp_ps(magnitude, _mm256_set1_ps(0x1p-12f), _CMP_LT_OQ);
    const __m256 y = _mm256_blendv_ps(_mm256_or_ps(t, _mm256_and_ps(x, sign_bit)), x, tiny);
    _mm256_storeu_ps(output + i, y);
  }
  for (; i < count; ++i) output[i] = std::tanh(input[i]);
}

// e^x in double, rounded once to float (within 1 ulp; overflow to Inf and
// gradual underflow as the rounding gives them). x is held to [-110, 90],
// beyond which float's e^x is 0 or Inf either way; each bound is the first
// operand of its min/max, so NaN passes through.
__attribute__((target("avx2,fma"))) inline __m128 exp_half_avx2(__m128 x) {
  const __m256d held = _mm256_max_pd(_mm256_set1_pd(-110.0), _mm256_min_pd(_mm256_set1_pd(90.0), _mm256_cvtps_pd(x)));
  return _mm256_cvtpd_ps(exp_double_avx2(held));
}

// log x in double, rounded once to float (within 1 ulp): x = 2^k m with m in
// [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) with s = (m - 1) / (m + 1),
// |s| < 0.172, by the odd series to s^17. Float denormals are normal in
// double, so the exponent bits give k directly. Zero, negatives, +Inf and
// NaN are set at the end as the C library's logf gives them.
__attribute__((target("avx2,fma"))) inline __m128 log_half_avx2(__m128 x_float) {
  const __m256d x = _mm256_cvtps_pd(x_float);
  const __m256i bits = _mm256_castpd_si256(x);
  // The biased exponent as a double: its bits under those of 2^52, minus 2^52.
  const __m256d two_52 = _mm256_set1_pd(4503599627370496.0);
  const __m256d biased = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(bits, 52), _mm256_castpd_si256(two_52))), two_52);
  __m256d k = _mm256_sub_pd(biased, _mm256_set1_pd(1023.0));
  __m256d m = _mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x000fffffffffffffLL)),
                                                  _mm256_set1_epi64x(0x3ff0000000000000LL)));
  const __m256d above = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730951), _CMP_GT_OQ);
  m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), above);
  k = _mm256_add_pd(k, _mm256_and_pd(above, _mm256_set1_pd(1.0)));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d s = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
  const __m256d s2 = _mm256_mul_pd(s, s);
  __m256d p = _mm256_set1_pd(1.0 / 17);
  for (const double c : {1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0}) {
    p = _mm256_fmadd_pd(p, s2, _mm256_set1_pd(c));
  }
  const __m256d log_m = _mm256_mul_pd(_mm256_add_pd(s, s), p);
  const __m256d result = _mm256_fmadd_pd(k, _mm256_set1_pd(0.6931471805599453), log_m);
  __m128 y = _mm256_cvtpd_ps(result);
  const float inf = std::numeric_limits<float>::infinity();
  const __m128 zero = _mm_setzero_ps();
  y = _mm_blendv_ps(y, _mm_set1_ps(-inf), _mm_cmp_ps(x_float, zero, _CMP_EQ_OQ));
  y = _mm_blendv_ps(y, _mm_set1_ps(std::numeric_limits<float>::quiet_NaN()), _mm_cmp_ps(x_float, zero, _CMP_LT_OQ));
  y = _mm_blendv_ps(y, x_float, _mm_cmp_ps(x_float, _mm_set1_ps(inf), _CMP_EQ_OQ));
  return _mm_blendv_ps(y, x_float, _mm_cmp_ps(x_float, x_float, _CMP_UNORD_Q));
}

// Runs `half` (4 floats in, 4 out) over 8 lanes at a time; the tail through `scalar`.
template <typename Half, typename Scalar>
__attribute__((target("avx2,fma"))) void map_halves_avx2(const float* input, float* output, size_t count, Half half,
                                                         Scalar scalar) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(input + i);
    _mm256_storeu_ps(output + i, _mm256_set_m128(half(_mm256_extractf128_ps(x, 1)), half(_mm256_castps256_ps128(x))));
  }
  for (; i < count; ++i) output[i] = scalar(input[i]);
}

#endif  // ETNA_KERNELS_X86

#ifdef ETNA_KERNELS_NEON

// The NEON forms of the AVX2 functions above: the same reductions,
// polynomials and special cases, 4 float lanes (2 double lanes) at a time,
// so both stay within the same bounds of the exact functions.

inline float32x4_t exp_nonpositive_neon(float32x4_t y) {
  y = vmaxq_f32(y, vdupq_n_f32(-87.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(y, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(y, n, vdupq_n_f32(0.693145751953125f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187045e-06f));
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  for (const float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = vfmaq_f32(vdupq_n_f32(c), p, r);
  const int32x4_t two_to_n = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(two_to_n));
}

void gelu_neon(const float* input, float* output, size_t count) {
  const uint32x4_t sign_bit = vdupq_n_u32(0x80000000u);
  const float32x4_t one = vdupq_n_f32(1.0f);
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const float32x4_t x = vld1q_f32(input + i);
    const float32x4_t z = vmulq_f32(x, vdupq_n_f32(0.70710678118654752f));
    const float32x4_t magnitude = vabsq_f32(z);
    const float32x4_t t = vdivq_f32(one, vfmaq_f32(one, magnitude, vdupq_n_f32(0.3275911f)));
    float32x4_t q = vdupq_n_f32(1.061405429f);
    for (const float c : {-1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f})
      q = vfmaq_f32(vdupq_n_f32(c), q, t);
    q = vmulq_f32(q, t);
    const float32x4_t tail = exp_nonpositive_neon(vnegq_f32(vmulq_f32(magnitude, magnitude)));
    const uint32x4_t erf_bits =
        vorrq_u32(vreinterpretq_u32_f32(vfmsq_f32(one, q, tail)), vandq_u32(vreinterpretq_u32_f32(z), sign_bit));
    const float32x4_t erf = vreinterpretq_f32_u32(erf_bits);
    vst1q_f32(output + i, vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), vaddq_f32(one, erf)));
  }
  for (; i < count; ++i) output[i] = gelu(input[i]);
}

inline float64x2_t exp_double_neon(float64x2_t y) {
  const float64x2_t shifter = vdupq_n_f64(6755399441055744.0);
  const float64x2_t shifted = vfmaq_f64(shifter, y, vdupq_n_f64(1.4426950408889634));
  const float64x2_t n = vsubq_f64(shifted, shifter);
  float64x2_t r = vfmsq_f64(y, n, vdupq_n_f64(6.93147180369123816490e-01));
  r = vfmsq_f64(r, n, vdupq_n_f64(1.90821492927058770002e-10));
  float64x2_t p = vdupq_n_f64(1.0 / 39916800);
  for (const double c :
       {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0}) {
    p = vfmaq_f64(vdupq_n_f64(c), p, r);
  }
  const int64x2_t two_to_n = vshlq_n_s64(vaddq_s64(vreinterpretq_s64_f64(shifted), vdupq_n_s64(1023)), 52);
  return vmulq_f64(p, vreinterpretq_f64_s64(two_to_n));
}

// `half` on each double pair of 4 floats, rounded back to float.
template <typename Half>
inline float32x4_t in_double_neon(float32x4_t x, Half half) {
  return vcvt_high_f32_f64(vcvt_f32_f64(half(vcvt_f64_f32(vget_low_f32(x)))), half(vcvt_high_f64_f32(x)));
}

inline float64x2_t tanh_magnitude_neon(float64x2_t magnitude) {
  const float64x2_t a = vminq_f64(vdupq_n_f64(20.0), magnitude);
  const float64x2_t e = exp_double_neon(vaddq_f64(a, a));
  const float64x2_t one = vdupq_n_f64(1.0);
  return vdivq_f64(vsubq_f64(e, one), vaddq_f64(e, one));
}

void tanh_neon(const float* input, float* output, size_t count) {
  const uint32x4_t sign_bit = vdupq_n_u32(0x80000000u);
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const float32x4_t x = vld1q_f32(input + i);
    const float32x4_t magnitude = vabsq_f32(x);
    const float32x4_t t = in_double_neon(magnitude, tanh_magnitude_neon);
    const float32x4_t signed_t =
        vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(t), vandq_u32(vreinterpretq_u32_f32(x), sign_bit)));
    vst1q_f32(output + i, vbslq_f32(vcltq_f32(magnitude, vdupq_n_f32(0x1p-12f)), x, signed_t));
  }
  for (; i < count; ++i) output[i] = std::tanh(input[i]);
}

inline float64x2_t exp_held_neon(float64x2_t x) {
  return exp_double_neon(vmaxq_f64(vdupq_n_f64(-110.0), vminq_f64(vdupq_n_f64(90.0), x)));
}

inline float64x2_t log_double_neon(float64x2_t x) {
  const uint64x2_t bits = vreinterpretq_u64_f64(x);
  const float64x2_t two_52 = vdupq_n_f64(4503599627370496.0);
  const float64x2_t biased =
      vsubq_f64(vreinterpretq_f64_u64(vorrq_u64(vshrq_n_u64(bits, 52), vreinterpretq_u64_f64(two_52))), two_52);
  float64x2_t k = vsubq_f64(biased, vdupq_n_f64(1023.0));
  float64x2_t m = vreinterpretq_f64_u64(
      vorrq_u64(vandq_u64(bits, vdupq_n_u64(0x000fffffffffffffULL)), vdupq_n_u64(0x3ff0000000000000ULL)));
  const uint64x2_t above = vcgtq_f64(m, vdupq_n_f64(1.4142135623730951));
  m = vbslq_f64(above, vmulq_f64(m, vdupq_n_f64(0.5)), m);
  k = vbslq_f64(above, vaddq_f64(k, vdupq_n_f64(1.0)), k);
  const float64x2_t one = vdupq_n_f64(1.0);
  const float64x2_t s = vdivq_f64(vsubq_f64(m, one), vaddq_f64(m, one));
  const float64x2_t s2 = vmulq_f64(s, s);
  float64x2_t p = vdupq_n_f64(1.0 / 17);
  for (const double c : {1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1.0}) {
    p = vfmaq_f64(vdupq_n_f64(c), p, s2);
  }
  return vfmaq_f64(vmulq_f64(vaddq_f64(s, s), p), k, vdupq_n_f64(0.6931471805599453));
}

inline float32x4_t log_neon4(float32x4_t x) {
  float32x4_t y = in_double_neon(x, log_double_neon);
  const float inf = std::numeric_limits<float>::infinity();
  const float32x4_t zero = vdupq_n_f32(0.0f);
  y = vbslq_f32(vceqq_f32(x, zero), vdupq_n_f32(-inf), y);
  y = vbslq_f32(vcltq_f32(x, zero), vdupq_n_f32(std::numeric_limits<float>::quiet_NaN()), y);
  y = vbslq_f32(vceqq_f32(x, vdupq_n_f32(inf)), x, y);
  return vbslq_f32(vceqq_f32(x, x), y, x);  // NaN passes through
}

// Runs `four` (4 floats in, 4 out) over the whole groups of 4; the tail through `scalar`.
template <typename Four, typename Scalar>
void map_fours_neon(const float* input, float* output, size_t count, Four four, Scalar scalar) {
  size_t i = 0;
  for (; i + 4 <= count; i += 4) vst1q_f32(output + i, four(vld1q_f32(input + i)));
  for (; i < count; ++i) output[i] = scalar(input[i]);
}

#endif  // ETNA_KERNELS_NEON

}  // namespace

Status transpose_kernel(const EtnaKernelCall& call) {
  return transpose(call.node, call.shapes, call.data, call.element_size, call.threadpool);
}

Status concatenate_kernel(const EtnaKernelCall& call) {
  concatenate(call.node, call.shapes, call.data, call.element_size, call.threadpool);
  return Status::ok();
}

Status slice_kernel(const EtnaKernelCall& call) {
  slice(call.node, call.shapes, call.data, call.element_size, call.threadpool);
  return Status::ok();
}

Status copy_kernel(const EtnaKernelCall& call) {
  const Node& node = call.node;
  const size_t bytes = call.shapes[node.outputs[0]].numel() * call.element_size;
  auto* target = static_cast<uint8_t*>(call.data[node.outputs[0]]);
  const auto* source = static_cast<const uint8_t*>(call.data[node.inputs[0]]);
  if (!bytes || target == source) return Status::ok();
  // Chunks may go to different threads only when the buffers do not overlap.
  if (target + bytes <= source || source + bytes <= target) {
    constexpr size_t kChunk = 4096;
    for_row_runs(call.threadpool, divide_up(bytes, kChunk), kChunk, [&](size_t first, size_t end) {
      std::memcpy(target + first * kChunk, source + first * kChunk, std::min(bytes, end * kChunk) - first * kChunk);
    });
  } else {
    std::memmove(target, source, bytes);
  }
  return Status::ok();
}

Status batch_matmul_kernel(const EtnaKernelCall& call) {
  batch_matmul(call.node, call.shapes, call.data, call.threadpool);
  return Status::ok();
}

Status rsqrt_kernel(const EtnaKernelCall& call) {
  return map_floats(call, [](float x) { return 1.0f / std::sqrt(x); });
}
Status sqrt_kernel(const EtnaKernelCall& call) {
  return map_floats(call, [](float x) { return std::sqrt(x); });
}
float exp_scalar(float x) { return std::exp(x); }
float log_scalar(float x) { return std::log(x); }
float tanh_scalar(float x) { return std::tanh(x); }

// A whole-tensor fp32 map with the build's vector instructions, AVX2 or NEON
// (nullptr where the build has none).
using FloatMapVector = void (*)(const float* input, float* output, size_t count);

#ifdef ETNA_KERNELS_X86
__attribute__((target("avx2,fma"))) void exp_avx2(const float* input, float* output, size_t count) {
  map_halves_avx2(
      input, output, count, [](__m128 x) __attribute__((target("avx2,fma"))) { return exp_half_avx2(x); }, exp_scalar);
}
__attribute__((target("avx2,fma"))) void log_avx2(const float* input, float* output, size_t count) {
  map_halves_avx2(
      input, output, count, [](__m128 x) __attribute__((target("avx2,fma"))) { return log_half_avx2(x); }, log_scalar);
}
#define ETNA_VECTOR_MAP(name) name##_avx2
bool vector_maps_active() { return path_has_avx2(active_dot_path()); }
#elif defined(ETNA_KERNELS_NEON)
void exp_neon(const float* input, float* output, size_t count) {
  map_fours_neon(
      input, output, count, [](float32x4_t x) { return in_double_neon(x, exp_held_neon); }, exp_scalar);
}
void log_neon(const float* input, float* output, size_t count) {
  map_fours_neon(input, output, count, log_neon4, log_scalar);
}
#define ETNA_VECTOR_MAP(name) name##_neon
bool vector_maps_active() { return path_has_neon(active_dot_path()); }
#else
#define ETNA_VECTOR_MAP(name) nullptr
bool vector_maps_active() { return false; }
#endif

// The vector map where the CPU's path has it, else `scalar` element by element.
template <typename Scalar>
Status map_floats_fastest(const EtnaKernelCall& call, FloatMapVector vector, Scalar scalar) {
  if (vector && vector_maps_active()) {
    vector(static_cast<const float*>(call.data[call.node.inputs[0]]),
           static_cast<float*>(call.data[call.node.outputs[0]]), call.shapes[call.node.outputs[0]].numel());
    return Status::ok();
  }
  return map_floats(call, scalar);
}

// Exp, Log and Tanh: with AVX2 or NEON, in double, within 1 ulp; otherwise
// the C library's expf, logf and tanhf.
Status exp_kernel(const EtnaKernelCall& call) { return map_floats_fastest(call, ETNA_VECTOR_MAP(exp), exp_scalar); }
Status log_kernel(const EtnaKernelCall& call) { return map_floats_fastest(call, ETNA_VECTOR_MAP(log), log_scalar); }
Status tanh_kernel(const EtnaKernelCall& call) { return map_floats_fastest(call, ETNA_VECTOR_MAP(tanh), tanh_scalar); }
// Exact (erf) form; the tanh approximation differs by up to ~1e-3. With
// AVX2 or NEON, erf is approximated to float precision (gelu_avx2).
Status gelu_kernel(const EtnaKernelCall& call) { return map_floats_fastest(call, ETNA_VECTOR_MAP(gelu), gelu); }
#undef ETNA_VECTOR_MAP
namespace {

// PReLU over n elements with `slope` (one value, or one per element). A
// select, not a branch: the signs of activations are not predictable. SSE2
// is every x86-64's; a compare that is false for NaN and -0 keeps both.
void prelu_span(const float* x, float* y, size_t n, const float* slope, bool one_slope) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps();
  const __m128 single = _mm_set1_ps(slope[0]);
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    const __m128 s = one_slope ? single : _mm_loadu_ps(slope + i);
    const __m128 below = _mm_cmplt_ps(v, zero);
    _mm_storeu_ps(y + i, _mm_or_ps(_mm_and_ps(below, _mm_mul_ps(v, s)), _mm_andnot_ps(below, v)));
  }
#endif
  for (; i < n; ++i) {
    const float s = one_slope ? slope[0] : slope[i];
    y[i] = x[i] < 0.0f ? x[i] * s : x[i];
  }
}

}  // namespace

// ONNX's PRelu, x < 0 ? x * slope : x, the slope broadcast against x from
// its last dim. -0 is not below 0, so it stays -0 whatever the slope
// (XNNPACK multiplies it by the slope), and NaN stays NaN.
//
// x's dims collapse into segments, innermost first, each either read under
// one slope (the slope broadcasts there) or walking the slope's elements in
// order; the innermost segment is the run prelu_span takes at once.
Status prelu_kernel(const EtnaKernelCall& call) {
  constexpr size_t kSpan = 4096;  // elements per piece of work under one slope
  const Shape& shape = call.shapes[call.node.outputs[0]];
  const Shape& slope_shape = call.shapes[call.node.inputs[1]];
  const size_t count = shape.numel();
  if (count == 0) return Status::ok();
  size_t sizes[kMaxRank] = {}, strides[kMaxRank] = {};  // per segment; stride 0 where the slope broadcasts
  size_t segments = 0, slope_step = 1;
  // prelu_shape: a slope of more than one element has at most x's rank.
  const size_t missing = slope_shape.numel() == 1 ? shape.rank : shape.rank - slope_shape.rank;
  for (size_t d = shape.rank; d-- > 0;) {
    const size_t size = shape.dims[d];
    const size_t stride = d >= missing && slope_shape.dims[d - missing] != 1 ? slope_step : 0;
    if (d >= missing) slope_step *= slope_shape.dims[d - missing];
    if (size == 1) continue;
    const bool joins = segments > 0 && (stride == 0 ? strides[segments - 1] == 0
                                                    : strides[segments - 1] != 0 &&
                                                          stride == strides[segments - 1] * sizes[segments - 1]);
    if (joins) {
      sizes[segments - 1] *= size;
    } else {
      sizes[segments] = size;
      strides[segments++] = stride;
    }
  }
  const size_t run = segments == 0 ? 1 : sizes[0];
  const bool one_slope = segments == 0 || strides[0] == 0;
  // One slope over a run: pieces of kSpan elements; one slope per element: whole runs.
  const size_t piece = one_slope ? std::min(run, kSpan) : run;
  const size_t pieces_per_run = divide_up(run, piece);
  const float* input = static_cast<const float*>(call.data[call.node.inputs[0]]);
  const float* slope = static_cast<const float*>(call.data[call.node.inputs[1]]);
  float* output = static_cast<float*>(call.data[call.node.outputs[0]]);
  for_row_runs(call.threadpool, count / run * pieces_per_run, piece * sizeof(float), [&](size_t first, size_t end) {
    for (size_t p = first; p < end; ++p) {
      const size_t r = p / pieces_per_run, begin = r * run + p % pieces_per_run * piece;
      size_t offset = 0;
      for (size_t s = 1, rest = r; s < segments; rest /= sizes[s++]) offset += rest % sizes[s] * strides[s];
      prelu_span(input + begin, output + begin, std::min(piece, r * run + run - begin), slope + offset, one_slope);
    }
  });
  return Status::ok();
}

Status sin_kernel(const EtnaKernelCall& call) {
  return map_floats(call, [](float x) { return std::sin(x); });
}
Status cos_kernel(const EtnaKernelCall& call) {
  return map_floats(call, [](float x) { return std::cos(x); });
}

Status run_etna_kernel(const Graph& graph, const Node& node, const std::vector<Shape>& shapes, void* const* data,
                       pthreadpool_t threadpool) {
  for (uint32_t index : node.inputs) {
    if (index != kNoValue && !data[index]) {
      return make_error(ErrorCode::kInternal,
                        node.describe() + ": input " + graph.describe_value(index) + " is unbound");
    }
  }
  for (uint32_t index : node.outputs) {
    if (!data[index]) {
      return make_error(ErrorCode::kInternal,
                        node.describe() + ": output " + graph.describe_value(index) + " is unbound");
    }
  }
  const NodeTypeInfo& info = node_type_info(node.type);
  if (!info.run) return make_error(ErrorCode::kInternal, node.describe() + " has no etna kernel");
  const size_t element_size = datatype_size(graph.values[node.outputs[0]].datatype);
  return info.run(EtnaKernelCall{node, shapes, data, element_size, graph, threadpool});
}

}  // namespace etna::xnn
