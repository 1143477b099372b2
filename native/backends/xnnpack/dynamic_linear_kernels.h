// The kernels of DynamicLinear (dynamic_linear.h) per dot-product path, and
// the one place that picks them: path_kernels. The portable kernels and row
// quantization are in dynamic_linear_kernels.cpp, the x86 ones (AVX2, AVX-512
// VNNI) in dynamic_linear_x86.cpp, the arm64 ones (NEON, dot products, 8-bit
// matrix multiplies) in dynamic_linear_arm.cpp.
//
// Every path computes the same int32 block sums and combines them in the same
// order (dot_rows_scalar says which), so all paths give bit-identical outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/dynamic_linear_layout.h"
#include "backends/xnnpack/graph.h"

namespace etna::xnn::dynamic_linear_detail {

// sums[r * w.padded_out + n] for activation rows rows[0..row_count) (codes
// stored plus 128) with zero points zero_points[r]: see dot_rows_scalar.
using DotRows = void (*)(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                         float* sums);

// A row's range: the least and greatest of 0 and its values, and whether
// every value is finite.
struct RowRange {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
};

struct PathKernels {
  // Block lengths the path reads whole are multiples of this; layouts with
  // other blocks run on the portable kernels.
  size_t block_multiple;
  DotRows eight_bit_rows, four_bit_rows;
  RowRange (*row_range)(const float* x, size_t count);
  // q[i] = round(clamp(x[i] * multiplier, low, high)) + offset, rounded to
  // nearest, ties to even; NaN goes to `low`.
  void (*quantize_values)(const float* x, size_t count, float multiplier, float low, float high, int32_t offset,
                          uint8_t* q);

  DotRows dot_rows(bool four_bit) const { return four_bit ? four_bit_rows : eight_bit_rows; }
  bool takes_blocks(size_t block_length) const { return block_length % block_multiple == 0; }
};

// The kernels of `path`.
const PathKernels& path_kernels(DotPath path);

// One row into its codes (stored plus 128, see DynamicRowParams) and
// parameters, with `kernels`' range and conversion steps.
DynamicRowParams quantize_row(const PathKernels& kernels, const float* x, size_t count, uint8_t* q);

// The portable steps, which the vector ones finish their rows' tails with.
RowRange row_range_scalar(const float* x, size_t count);
void quantize_values_scalar(const float* x, size_t count, float multiplier, float low, float high, int32_t offset,
                            uint8_t* q);

extern const PathKernels kScalarKernels;
#if defined(__x86_64__) || defined(__i386__)
extern const PathKernels kAvx2Kernels;
extern const PathKernels kAvx512VnniKernels;
#endif
#if defined(__aarch64__)
extern const PathKernels kNeonKernels;
extern const PathKernels kNeonDotKernels;
extern const PathKernels kNeonI8mmKernels;
#endif

}  // namespace etna::xnn::dynamic_linear_detail
