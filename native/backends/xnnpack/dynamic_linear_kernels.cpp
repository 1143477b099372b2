#include "backends/xnnpack/dynamic_linear_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/bf16.h"

namespace etna::xnn::dynamic_linear_detail {
namespace {

// The signed weight at (channel n, input k).
int weight_at(const PackedView& w, size_t n, size_t k) {
  const CodePlace place = w.layout.code_place(n, k);
  const uint8_t byte = w.codes[place.byte];
  if (!w.layout.four_bit) return static_cast<int8_t>(byte);
  return (place.high_nibble ? byte >> 4 : byte & 0xF) - kFourBitZero;
}

float scale_at(const PackedView& w, size_t n, size_t b) {
  if (!w.layout.blockwise) return w.channel_scales[n];
  uint16_t bits;
  std::memcpy(&bits, w.codes + w.layout.block_scales(n / kColumns, b) + n % kColumns * sizeof bits, sizeof bits);
  return bfloat16_to_float(bits);
}

// sums[r * padded_out + n]: over blocks b in order, acc = fma(D(r, n, b),
// scale(n, b), acc), where D is the exact int32 dot product of activation row
// r and channel n over block b; per-channel layouts first take the zero point
// (zero_points[r]) times the channel's weight sum off D, blockwise layouts
// take it times the channel's scaled sum off acc at the end. Every path
// computes these operations in this order, so all give the same bits.
void dot_rows_scalar(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                     float* sums) {
  const PanelLayout& layout = w.layout;
  for (size_t r = 0; r < row_count; ++r) {
    const uint8_t* a = rows[r];
    for (size_t n = 0; n < w.padded_out; ++n) {
      float acc = 0.0f;
      for (size_t b = 0; b < layout.blocks; ++b) {
        int32_t dot = 0;
        const size_t begin = b * layout.block_length;
        for (size_t k = begin; k < begin + layout.block_length; ++k) dot += int32_t{a[k]} * weight_at(w, n, k);
        if (!layout.blockwise) dot -= zero_points[r] * w.weight_sums[n];
        acc = std::fma(static_cast<float>(dot), scale_at(w, n, b), acc);
      }
      if (layout.blockwise) acc = std::fma(-static_cast<float>(zero_points[r]), w.scaled_sums[n], acc);
      sums[r * w.padded_out + n] = acc;
    }
  }
}

// Per-row parameters of XNNPACK's qd8 conversion (as of November 2024): the
// range [min(0, lo), max(0, hi)] mapped onto [-128, 127] by the multiplier
// 255 / (hi - lo) (1 for an all-zero row), which also converts the row; the
// zero point taken from the end of the range with the smaller error, clamped
// and rounded to nearest, ties to even; the stored scale is 1 / multiplier.
// A row holding NaN or an infinity has no such range: its scale is NaN, so
// every output of the row is NaN (as quantizing it in PyTorch gives), whatever
// its codes (the multiplier is then 0). Only the values of lo and hi count,
// not the sign of a zero, so any order of taking the minimum gives the same
// parameters.
DynamicRowParams row_params(const RowRange& range, float& multiplier) {
  DynamicRowParams params;
  if (!range.finite) {
    params.scale = std::numeric_limits<float>::quiet_NaN();
    params.zero_point = 0;
    multiplier = 0.0f;
    return params;
  }
  const float qmin = -128.0f, qmax = 127.0f;
  const float lo = range.lo, hi = range.hi;
  multiplier = lo == hi ? 1.0f : (qmax - qmin) / (hi - lo);
  const float scaled_lo = lo * multiplier, scaled_hi = hi * multiplier;
  float zero = (qmin + scaled_lo) + (qmax + scaled_hi) > 0 ? qmin - scaled_lo : qmax - scaled_hi;
  zero = std::fmin(std::fmax(zero, qmin), qmax);
  // An all-zero row is all zero-point codes whatever its zero point (XNNPACK
  // picks 127). With 0 (code 128, a power of two) a blockwise layout's float
  // term for the zero point cancels its blocks' sum exactly, so the row's
  // outputs are exactly the bias on every layout.
  if (lo == hi) zero = 0.0f;
  params.scale = 1.0f / multiplier;
  params.zero_point = static_cast<int32_t>(std::nearbyint(zero));
  return params;
}

}  // namespace

// fmin/fmax keep NaN out of lo/hi; x * 0 is NaN exactly for NaN and infinities.
RowRange row_range_scalar(const float* x, size_t count) {
  RowRange range;
  float probe = 0.0f;
  for (size_t i = 0; i < count; ++i) {
    range.lo = std::fmin(range.lo, x[i]);
    range.hi = std::fmax(range.hi, x[i]);
    probe += x[i] * 0.0f;
  }
  range.finite = probe == 0.0f;
  return range;
}

// fmax puts NaN (an infinity times a zero multiplier) at `low`.
void quantize_values_scalar(const float* x, size_t count, float multiplier, float low, float high, int32_t offset,
                            uint8_t* q) {
  for (size_t i = 0; i < count; ++i) {
    const float v = std::fmin(std::fmax(x[i] * multiplier, low), high);
    q[i] = static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(v)) + offset);
  }
}

DynamicRowParams quantize_row(const PathKernels& kernels, const float* x, size_t count, uint8_t* q) {
  const RowRange range = kernels.row_range(x, count);
  float multiplier = 1.0f;
  DynamicRowParams row = row_params(range, multiplier);
  const float low = static_cast<float>(-128 - row.zero_point), high = static_cast<float>(127 - row.zero_point);
  const int32_t offset = row.zero_point + 128;
  kernels.quantize_values(x, count, multiplier, low, high, offset, q);
  row.zero_point += 128;
  return row;
}

const PathKernels kScalarKernels{1, dot_rows_scalar, dot_rows_scalar, row_range_scalar, quantize_values_scalar};

const PathKernels& path_kernels(DotPath path) {
  switch (path) {
    case DotPath::kScalar: break;
#if defined(__x86_64__) || defined(__i386__)
    case DotPath::kAvx2: return kAvx2Kernels;
    case DotPath::kAvx512Vnni: return kAvx512VnniKernels;
#else
    case DotPath::kAvx2:
    case DotPath::kAvx512Vnni: break;
#endif
#if defined(__aarch64__)
    case DotPath::kNeon: return kNeonKernels;
    case DotPath::kNeonDot: return kNeonDotKernels;
    case DotPath::kNeonI8mm: return kNeonI8mmKernels;
#else
    case DotPath::kNeon:
    case DotPath::kNeonDot:
    case DotPath::kNeonI8mm: break;
#endif
  }
  return kScalarKernels;
}

}  // namespace etna::xnn::dynamic_linear_detail
