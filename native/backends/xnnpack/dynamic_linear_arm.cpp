// DynamicLinear's arm64 kernels: plain NEON (int16 products, pairwise
// widened), the 8-bit dot products (udot) and the 8-bit matrix multiplies
// (usmmla) for tiles of several rows. The file builds for the baseline
// Armv8-A; the functions that need the dot products or i8mm carry them as
// target attributes, and path_kernels runs them only on CPUs that have them.
//
// Every kernel computes each block's exact int32 dot product (integer
// wrap-around in the steps cancels out, as the true sum fits in int32) and
// combines them with the fused multiply-adds dot_rows_scalar uses, so all
// paths give the same bits.
#if defined(__aarch64__)

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "backends/xnnpack/dynamic_linear_kernels.h"

namespace etna::xnn::dynamic_linear_detail {
namespace {

// Loops over a tile's registers must unroll, or their arrays live in memory.
#define ETNA_UNROLL _Pragma("GCC unroll 16")
#define ETNA_DOTPROD_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
#define ETNA_I8MM_TARGET __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))

// The vector kernels read blocks two quads (8 input channels) at a time.
constexpr size_t kNeonBlock = 2 * kQuad;

// What a block's int32 dot products of one group are scaled by: its 8 scales
// and, in per-channel layouts, the weight sums the zero point multiplies
// (channels 0..3 in [0], 4..7 in [1]).
struct BlockTerms {
  float32x4_t scales[2];
  int32x4_t weight_sums[2];
};

inline BlockTerms block_terms(const PackedView& w, size_t group, size_t block) {
  BlockTerms terms;
  if (!w.layout.blockwise) {
    for (size_t h = 0; h < 2; ++h) {
      terms.scales[h] = vld1q_f32(w.channel_scales + group * kColumns + 4 * h);
      terms.weight_sums[h] = vld1q_s32(w.weight_sums + group * kColumns + 4 * h);
    }
    return terms;
  }
  // bf16 scales: their bits are the high half of the fp32 ones.
  uint16_t bits[kColumns];
  std::memcpy(bits, w.codes + w.layout.block_scales(group, block), sizeof bits);
  const uint16x8_t both = vld1q_u16(bits);
  terms.scales[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(both), 16));
  terms.scales[1] = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(both), 16));
  terms.weight_sums[0] = terms.weight_sums[1] = vdupq_n_s32(0);
  return terms;
}

// acc = fma(dot (less the zero point's part, per-channel layouts), scales, acc).
inline float32x4_t accumulate_block(const PackedView& w, float32x4_t scales, int32x4_t weight_sums, int32_t zero_point,
                                    int32x4_t dot, float32x4_t acc) {
  if (!w.layout.blockwise) dot = vmlsq_s32(dot, vdupq_n_s32(zero_point), weight_sums);
  return vfmaq_f32(acc, vcvtq_f32_s32(dot), scales);
}

// Stores one row's 8 channels of group `group`; after the last block,
// blockwise layouts take the zero point's part off: fma(-zp, scaled_sum, acc).
inline void store_channels(const PackedView& w, size_t group, int32_t zero_point, const float32x4_t* acc, float* out) {
  for (size_t h = 0; h < 2; ++h) {
    float32x4_t value = acc[h];
    if (w.layout.blockwise) {
      value = vfmsq_f32(value, vdupq_n_f32(static_cast<float>(zero_point)),
                        vld1q_f32(w.scaled_sums + group * kColumns + 4 * h));
    }
    vst1q_f32(out + 4 * h, value);
  }
}

// The codes of one group's quads 2u and 2u + 1 (`quad` = 2u) as bytes,
// channels 0..3 in [0] and 4..7 in [1]: 8-bit weights as stored (int8 bits),
// 4-bit ones as their codes (weight + 8, 0..15).
template <bool kFourBit>
inline void load_quad_pair(const uint8_t* codes, size_t quad, uint8x16_t* even, uint8x16_t* odd) {
  if (kFourBit) {
    const uint8x16_t low_nibbles = vdupq_n_u8(0x0F);
    for (size_t h = 0; h < 2; ++h) {
      const uint8x16_t packed = vld1q_u8(codes + quad / 2 * 32 + 16 * h);
      even[h] = vandq_u8(packed, low_nibbles);
      odd[h] = vshrq_n_u8(packed, 4);
    }
  } else {
    for (size_t h = 0; h < 2; ++h) {
      even[h] = vld1q_u8(codes + quad * 32 + 16 * h);
      odd[h] = vld1q_u8(codes + (quad + 1) * 32 + 16 * h);
    }
  }
}

// The weights of load_quad_pair as signed values.
template <bool kFourBit>
inline int8x16_t signed_weights(uint8x16_t codes) {
  const int8x16_t bits = vreinterpretq_s8_u8(codes);
  return kFourBit ? vsubq_s8(bits, vdupq_n_s8(kFourBitZero)) : bits;
}

// ---------------------------------------------------------------------------
// Plain NEON: an activation (0..255) times a weight (-128..127) fits int16,
// two such products do not, so each multiply's 8 products are added in pairs
// into int32 lanes (sadalp): lanes [2j, 2j + 1] of an accumulator hold halves
// of channel j's sum, added at the end of the block.

// Four activations of quad t, twice, as int16.
inline int16x8_t twice_quad(int16x4_t quad) { return vcombine_s16(quad, quad); }

template <bool kFourBit, size_t kRows, size_t kGroups>
void dot_rows_neon_tile(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t first_group,
                        float* sums) {
  const PanelLayout& layout = w.layout;
  float32x4_t acc[kRows * kGroups][2];
  ETNA_UNROLL
  for (auto& pair : acc) pair[0] = pair[1] = vdupq_n_f32(0.0f);
  for (size_t b = 0; b < layout.blocks; ++b) {
    // partial[r * kGroups + g][c]: channel pairs (0, 1), (2, 3), (4, 5), (6, 7).
    int32x4_t partial[kRows * kGroups][4];
    ETNA_UNROLL
    for (auto& p : partial) p[0] = p[1] = p[2] = p[3] = vdupq_n_s32(0);
    for (size_t quad = 0; quad < layout.quads_per_block; quad += 2) {
      int16x8_t weights[kGroups][2][4];  // [group][even, odd quad][channel pair]
      ETNA_UNROLL
      for (size_t g = 0; g < kGroups; ++g) {
        uint8x16_t even[2], odd[2];
        load_quad_pair<kFourBit>(w.codes + layout.group_block(first_group + g, b), quad, even, odd);
        ETNA_UNROLL
        for (size_t h = 0; h < 2; ++h) {
          const int8x16_t e = signed_weights<kFourBit>(even[h]), o = signed_weights<kFourBit>(odd[h]);
          weights[g][0][2 * h] = vmovl_s8(vget_low_s8(e));
          weights[g][0][2 * h + 1] = vmovl_s8(vget_high_s8(e));
          weights[g][1][2 * h] = vmovl_s8(vget_low_s8(o));
          weights[g][1][2 * h + 1] = vmovl_s8(vget_high_s8(o));
        }
      }
      const size_t k = b * layout.block_length + quad * kQuad;
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        const int16x8_t a = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(rows[r] + k)));
        const int16x8_t a_even = twice_quad(vget_low_s16(a)), a_odd = twice_quad(vget_high_s16(a));
        ETNA_UNROLL
        for (size_t g = 0; g < kGroups; ++g) {
          ETNA_UNROLL
          for (size_t c = 0; c < 4; ++c) {
            int32x4_t& p = partial[r * kGroups + g][c];
            p = vpadalq_s16(p, vmulq_s16(a_even, weights[g][0][c]));
            p = vpadalq_s16(p, vmulq_s16(a_odd, weights[g][1][c]));
          }
        }
      }
    }
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      const BlockTerms terms = block_terms(w, first_group + g, b);
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        const int32x4_t* p = partial[r * kGroups + g];
        const int32x4_t dots[2] = {vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3])};
        ETNA_UNROLL
        for (size_t h = 0; h < 2; ++h) {
          acc[r * kGroups + g][h] = accumulate_block(w, terms.scales[h], terms.weight_sums[h], zero_points[r], dots[h],
                                                     acc[r * kGroups + g][h]);
        }
      }
    }
  }
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      store_channels(w, first_group + g, zero_points[r], acc[r * kGroups + g],
                     sums + r * w.padded_out + (first_group + g) * kColumns);
    }
  }
}

// ---------------------------------------------------------------------------
// Dot products (udot): unsigned activations times unsigned bytes, four
// products into each int32 lane. 8-bit weights go in as weight + 128 (the
// sign bit flipped), 4-bit ones as their codes (weight + 8); the block's
// activation sum times that offset comes off after the block.

// The sum of `count` (a multiple of 8) activations from a.
inline uint32_t activation_sum(const uint8_t* a, size_t count) {
  uint32_t sum = 0;
  for (size_t i = 0; i < count; i += 8) sum += vaddlv_u8(vld1_u8(a + i));
  return sum;
}

template <bool kFourBit>
constexpr int32_t kUnsignedOffset = kFourBit ? kFourBitZero : 128;

template <bool kFourBit, size_t kRows, size_t kGroups>
ETNA_DOTPROD_TARGET void dot_rows_udot_tile(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points,
                                            size_t first_group, float* sums) {
  const PanelLayout& layout = w.layout;
  const uint8x16_t sign_bits = vdupq_n_u8(0x80);
  float32x4_t acc[kRows * kGroups][2];
  ETNA_UNROLL
  for (auto& pair : acc) pair[0] = pair[1] = vdupq_n_f32(0.0f);
  for (size_t b = 0; b < layout.blocks; ++b) {
    uint32x4_t dots[kRows * kGroups][2];
    ETNA_UNROLL
    for (auto& pair : dots) pair[0] = pair[1] = vdupq_n_u32(0);
    for (size_t quad = 0; quad < layout.quads_per_block; quad += 2) {
      uint8x16_t even[kGroups][2], odd[kGroups][2];
      ETNA_UNROLL
      for (size_t g = 0; g < kGroups; ++g) {
        load_quad_pair<kFourBit>(w.codes + layout.group_block(first_group + g, b), quad, even[g], odd[g]);
        if (!kFourBit) {
          ETNA_UNROLL
          for (size_t h = 0; h < 2; ++h) {
            even[g][h] = veorq_u8(even[g][h], sign_bits);
            odd[g][h] = veorq_u8(odd[g][h], sign_bits);
          }
        }
      }
      const size_t k = b * layout.block_length + quad * kQuad;
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        const uint8x8_t a = vld1_u8(rows[r] + k);  // quad 2u in 32-bit lane 0, 2u + 1 in lane 1
        ETNA_UNROLL
        for (size_t g = 0; g < kGroups; ++g) {
          ETNA_UNROLL
          for (size_t h = 0; h < 2; ++h) {
            uint32x4_t& d = dots[r * kGroups + g][h];
            d = vdotq_lane_u32(d, even[g][h], a, 0);
            d = vdotq_lane_u32(d, odd[g][h], a, 1);
          }
        }
      }
    }
    int32x4_t offsets[kRows];
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) {
      const uint32_t sum = activation_sum(rows[r] + b * layout.block_length, layout.block_length);
      offsets[r] = vdupq_n_s32(static_cast<int32_t>(sum * static_cast<uint32_t>(kUnsignedOffset<kFourBit>)));
    }
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      const BlockTerms terms = block_terms(w, first_group + g, b);
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        ETNA_UNROLL
        for (size_t h = 0; h < 2; ++h) {
          const int32x4_t dot = vsubq_s32(vreinterpretq_s32_u32(dots[r * kGroups + g][h]), offsets[r]);
          acc[r * kGroups + g][h] =
              accumulate_block(w, terms.scales[h], terms.weight_sums[h], zero_points[r], dot, acc[r * kGroups + g][h]);
        }
      }
    }
  }
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      store_channels(w, first_group + g, zero_points[r], acc[r * kGroups + g],
                     sums + r * w.padded_out + (first_group + g) * kColumns);
    }
  }
}

// ---------------------------------------------------------------------------
// 8-bit matrix multiplies (usmmla): a 2 x 8 block of unsigned activations
// (two rows, 8 input channels) times an 8 x 2 block of signed weights (two
// channels) into a 2 x 2 int32 block [r0 c0, r0 c1, r1 c0, r1 c1]. The weight
// operand holds each channel's 8 codes side by side, which zipping the
// 32-bit lanes of quads 2u and 2u + 1 gives: zip1 takes channels (0, 1) of a
// register, zip2 channels (2, 3).

template <bool kFourBit, size_t kRowPairs>
ETNA_I8MM_TARGET void dot_rows_mmla_tile(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points,
                                         size_t group, float* sums) {
  const PanelLayout& layout = w.layout;
  constexpr size_t kRows = 2 * kRowPairs;
  float32x4_t acc[kRows][2];
  ETNA_UNROLL
  for (auto& pair : acc) pair[0] = pair[1] = vdupq_n_f32(0.0f);
  const uint8_t* codes = w.codes + layout.group_block(group, 0);
  for (size_t b = 0; b < layout.blocks; ++b, codes += layout.block_bytes) {
    int32x4_t blocks[kRowPairs][4];  // [row pair][channel pair]
    ETNA_UNROLL
    for (auto& pair : blocks) pair[0] = pair[1] = pair[2] = pair[3] = vdupq_n_s32(0);
    for (size_t quad = 0; quad < layout.quads_per_block; quad += 2) {
      uint8x16_t even[2], odd[2];
      load_quad_pair<kFourBit>(codes, quad, even, odd);
      int8x16_t channel_pairs[4];
      ETNA_UNROLL
      for (size_t h = 0; h < 2; ++h) {
        const uint32x4_t e = vreinterpretq_u32_s8(signed_weights<kFourBit>(even[h]));
        const uint32x4_t o = vreinterpretq_u32_s8(signed_weights<kFourBit>(odd[h]));
        channel_pairs[2 * h] = vreinterpretq_s8_u32(vzip1q_u32(e, o));
        channel_pairs[2 * h + 1] = vreinterpretq_s8_u32(vzip2q_u32(e, o));
      }
      const size_t k = b * layout.block_length + quad * kQuad;
      ETNA_UNROLL
      for (size_t p = 0; p < kRowPairs; ++p) {
        const uint8x16_t a = vcombine_u8(vld1_u8(rows[2 * p] + k), vld1_u8(rows[2 * p + 1] + k));
        ETNA_UNROLL
        for (size_t c = 0; c < 4; ++c) blocks[p][c] = vusmmlaq_s32(blocks[p][c], a, channel_pairs[c]);
      }
    }
    const BlockTerms terms = block_terms(w, group, b);
    ETNA_UNROLL
    for (size_t p = 0; p < kRowPairs; ++p) {
      ETNA_UNROLL
      for (size_t h = 0; h < 2; ++h) {
        // Channels 4h..4h + 3 of the pair's first row, then of its second.
        const int64x2_t low = vreinterpretq_s64_s32(blocks[p][2 * h]);
        const int64x2_t high = vreinterpretq_s64_s32(blocks[p][2 * h + 1]);
        const int32x4_t first = vreinterpretq_s32_s64(vzip1q_s64(low, high));
        const int32x4_t second = vreinterpretq_s32_s64(vzip2q_s64(low, high));
        acc[2 * p][h] =
            accumulate_block(w, terms.scales[h], terms.weight_sums[h], zero_points[2 * p], first, acc[2 * p][h]);
        acc[2 * p + 1][h] = accumulate_block(w, terms.scales[h], terms.weight_sums[h], zero_points[2 * p + 1], second,
                                             acc[2 * p + 1][h]);
      }
    }
  }
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    store_channels(w, group, zero_points[r], acc[r], sums + r * w.padded_out + group * kColumns);
  }
}

// ---------------------------------------------------------------------------
// Row tilings: several rows share each load of weights; single rows (decode)
// take several groups at once.

template <size_t kGroups, auto kTile>
void over_groups(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, float* sums) {
  static_assert(kPanelGroups % kGroups == 0, "a tile takes whole parts of a panel");
  for (size_t g = 0; g < w.padded_out / kColumns; g += kGroups) kTile(w, rows, zero_points, g, sums);
}

// Four rows at a time over one group, then single rows over two groups.
template <auto kFourRows, auto kOneRow>
void dot_rows_by_four(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                      float* sums) {
  size_t r = 0;
  for (; r + 4 <= row_count; r += 4) over_groups<1, kFourRows>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  for (; r < row_count; ++r) over_groups<2, kOneRow>(w, rows + r, zero_points + r, sums + r * w.padded_out);
}

template <bool kFourBit>
void dot_rows_neon(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  dot_rows_by_four<dot_rows_neon_tile<kFourBit, 4, 1>, dot_rows_neon_tile<kFourBit, 1, 2>>(w, rows, zero_points,
                                                                                           row_count, sums);
}

template <bool kFourBit>
void dot_rows_udot(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  dot_rows_by_four<dot_rows_udot_tile<kFourBit, 4, 1>, dot_rows_udot_tile<kFourBit, 1, 2>>(w, rows, zero_points,
                                                                                           row_count, sums);
}

template <bool kFourBit>
void dot_rows_mmla(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  size_t r = 0;
  for (; r + 4 <= row_count; r += 4) {
    over_groups<1, dot_rows_mmla_tile<kFourBit, 2>>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  for (; r + 2 <= row_count; r += 2) {
    over_groups<1, dot_rows_mmla_tile<kFourBit, 1>>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  if (r < row_count) dot_rows_udot<kFourBit>(w, rows + r, zero_points + r, row_count - r, sums + r * w.padded_out);
}

// row_range_scalar and quantize_values_scalar four values at a time, with the
// same bits: minimum and maximum are exact, so lanes may take them in any
// order (fminnm/fmaxnm skip a NaN, as fmin/fmax do, and the probe marks the
// row anyway); fmaxnm(NaN, low) gives `low`, as fmax does; fcvtns rounds to
// nearest, ties to even, as nearbyint does in the default rounding mode.
RowRange row_range_neon(const float* x, size_t count) {
  const float32x4_t zero = vdupq_n_f32(0.0f);
  float32x4_t lo[2] = {zero, zero}, hi[2] = {zero, zero}, probe[2] = {zero, zero};
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (size_t u = 0; u < 2; ++u) {
      const float32x4_t v = vld1q_f32(x + i + 4 * u);
      lo[u] = vminnmq_f32(lo[u], v);
      hi[u] = vmaxnmq_f32(hi[u], v);
      probe[u] = vaddq_f32(probe[u], vmulq_f32(v, zero));
    }
  }
  RowRange range = row_range_scalar(x + i, count - i);
  range.lo = std::min(range.lo, vminnmvq_f32(vminnmq_f32(lo[0], lo[1])));
  range.hi = std::max(range.hi, vmaxnmvq_f32(vmaxnmq_f32(hi[0], hi[1])));
  const float probe_sum = vaddvq_f32(vaddq_f32(probe[0], probe[1]));
  range.finite = range.finite && probe_sum == 0.0f;
  return range;
}

void quantize_values_neon(const float* x, size_t count, float multiplier, float low, float high, int32_t offset,
                          uint8_t* q) {
  const float32x4_t scale = vdupq_n_f32(multiplier), lows = vdupq_n_f32(low), highs = vdupq_n_f32(high);
  const int32x4_t offsets = vdupq_n_s32(offset);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    int32x4_t codes[2];
    for (size_t u = 0; u < 2; ++u) {
      const float32x4_t v = vminnmq_f32(vmaxnmq_f32(vmulq_f32(vld1q_f32(x + i + 4 * u), scale), lows), highs);
      codes[u] = vaddq_s32(vcvtnq_s32_f32(v), offsets);
    }
    // Codes are 0..255: unsigned-saturating narrowing keeps them.
    const uint16x8_t words = vcombine_u16(vqmovun_s32(codes[0]), vqmovun_s32(codes[1]));
    vst1_u8(q + i, vqmovn_u16(words));
  }
  quantize_values_scalar(x + i, count - i, multiplier, low, high, offset, q + i);
}

}  // namespace

const PathKernels kNeonKernels{kNeonBlock, dot_rows_neon<false>, dot_rows_neon<true>, row_range_neon,
                               quantize_values_neon};
const PathKernels kNeonDotKernels{kNeonBlock, dot_rows_udot<false>, dot_rows_udot<true>, row_range_neon,
                                  quantize_values_neon};
// Several rows take the matrix multiplies, a last single row the dot products.
const PathKernels kNeonI8mmKernels{kNeonBlock, dot_rows_mmla<false>, dot_rows_mmla<true>, row_range_neon,
                                   quantize_values_neon};

}  // namespace etna::xnn::dynamic_linear_detail

#endif  // __aarch64__
