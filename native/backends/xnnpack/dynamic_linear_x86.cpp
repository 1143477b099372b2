// DynamicLinear's x86 kernels: AVX2 with FMA, and AVX-512 VNNI (vpdpbusd on
// 256-bit registers, 512-bit ones for tiles of eight rows). Each function
// carries its instruction set as a target attribute, so the file builds with
// the same flags as the rest; path_kernels runs it only on CPUs that have them.
#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/xnnpack/dynamic_linear_kernels.h"

namespace etna::xnn::dynamic_linear_detail {
namespace {

constexpr size_t kSimdBlock = 32;       // AVX2 runs blocks of a multiple of this many input channels
constexpr size_t kPrefetchBlocks = 16;  // how many blocks ahead the vector tiles ask for blockwise weights

// Decode reads each weight once, from memory: with blockwise weights, the
// vector tiles ask for the codes and scales of their groups kPrefetchBlocks
// blocks ahead while a block computes (past a panel's end, the next panel's).
// 16 blocks of 32 (9 KiB of a panel) ahead: a stories110m decode step (one
// thread, VNNI) took 3.3 ms at 4 blocks, 3.0 at 8, 2.6 at 16 and 32, 2.7 at
// 64; a llama-1b-shape step 25.0 ms at 4, 19.9 at 16. Inlined by force: a
// call per block costs more than the prefetch saves.
__attribute__((always_inline)) inline void prefetch_ahead(const PackedView& w, size_t first_group, size_t groups,
                                                          size_t block) {
  // Addresses as integers: the lines ahead may lie past the arrays' ends,
  // where a prefetch is harmless but pointer arithmetic is not defined.
  const uintptr_t base = reinterpret_cast<uintptr_t>(w.codes);
  const uintptr_t codes = base + w.layout.group_block(first_group, block + kPrefetchBlocks);
  for (size_t line = 0; line < groups * w.layout.group_block_bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(codes + line), _MM_HINT_T0);
  }
  const uintptr_t scales = base + w.layout.block_scales(first_group, block + kPrefetchBlocks);
  _mm_prefetch(reinterpret_cast<const char*>(scales), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(scales + groups * kColumns * sizeof(uint16_t) - 1), _MM_HINT_T0);
}

// Loops over a tile's registers must unroll, or their arrays live in memory.
#define ETNA_UNROLL _Pragma("GCC unroll 16")
#define ETNA_AVX2_TARGET __attribute__((target("avx2,fma")))

// Four activations of row `a` from input channel k, in every 32-bit lane.
ETNA_AVX2_TARGET inline __m256i broadcast_quad(const uint8_t* a, size_t k) {
  int32_t quad;
  std::memcpy(&quad, a + k, sizeof quad);
  return _mm256_set1_epi32(quad);
}

// What a block's int32 dot products of group g are scaled by: its 8 scales
// and, in per-channel layouts, the weight sums the zero point multiplies.
struct BlockTerms {
  __m256 scales;
  __m256i weight_sums;
};

ETNA_AVX2_TARGET inline BlockTerms block_terms(const PackedView& w, size_t group, size_t block) {
  if (!w.layout.blockwise) {
    return {_mm256_loadu_ps(w.channel_scales + group * kColumns),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.weight_sums + group * kColumns))};
  }
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.codes + w.layout.block_scales(group, block)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16)), _mm256_setzero_si256()};
}

// acc = fma(dot (less the zero point's part, per-channel layouts), scales, acc).
ETNA_AVX2_TARGET inline __m256 accumulate_block(const PackedView& w, const BlockTerms& terms, int32_t zero_point,
                                                __m256i dot, __m256 acc) {
  if (!w.layout.blockwise)
    dot = _mm256_sub_epi32(dot, _mm256_mullo_epi32(_mm256_set1_epi32(zero_point), terms.weight_sums));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), terms.scales, acc);
}

// After the last block, blockwise layouts take the zero point's part off.
ETNA_AVX2_TARGET inline __m256 finish_channels(const PackedView& w, size_t group, int32_t zero_point, __m256 acc) {
  if (!w.layout.blockwise) return acc;
  return _mm256_fnmadd_ps(_mm256_set1_ps(static_cast<float>(zero_point)),
                          _mm256_loadu_ps(w.scaled_sums + group * kColumns), acc);
}

// Finishes a tile's kRows x kGroups accumulators (acc[r * kGroups + g]) into
// rows of sums, groups from first_group on.
template <size_t kRows, size_t kGroups>
ETNA_AVX2_TARGET inline void store_tile(const PackedView& w, const int32_t* zero_points, size_t first_group,
                                        const __m256* acc, float* sums) {
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      _mm256_storeu_ps(sums + r * w.padded_out + (first_group + g) * kColumns,
                       finish_channels(w, first_group + g, zero_points[r], acc[r * kGroups + g]));
    }
  }
}

// The int32 dot products of kRows rows with the 8 channels of one group's
// block (codes), from input channel first_input on, lane j for channel j.
template <size_t kRows>
ETNA_AVX2_TARGET inline void block_dots_four_bit(const uint8_t* codes, const uint8_t* const* rows, size_t first_input,
                                                 size_t quads, __m256i* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i zero_code = _mm256_set1_epi8(kFourBitZero);
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) dots[r] = _mm256_setzero_si256();
  // Eight quads of int16 products at most (8 * 2 * 255 * 8 < 32768), then widen.
  for (size_t run = 0; run < quads; run += 8) {
    __m256i products[kRows];
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) products[r] = _mm256_setzero_si256();
    for (size_t quad = run; quad < run + 8; quad += 2) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + quad / 2 * 32));
      const __m256i even = _mm256_sub_epi8(_mm256_and_si256(packed, low_nibbles), zero_code);
      const __m256i odd = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles), zero_code);
      const size_t k = first_input + quad * kQuad;
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        products[r] = _mm256_add_epi16(products[r], _mm256_maddubs_epi16(broadcast_quad(rows[r], k), even));
        products[r] = _mm256_add_epi16(products[r], _mm256_maddubs_epi16(broadcast_quad(rows[r], k + kQuad), odd));
      }
    }
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) dots[r] = _mm256_add_epi32(dots[r], _mm256_madd_epi16(products[r], ones));
  }
}

// 8-bit weights would saturate maddubs, so both sides are widened to int16.
template <size_t kRows>
ETNA_AVX2_TARGET inline void block_dots_eight_bit(const uint8_t* codes, const uint8_t* const* rows, size_t first_input,
                                                  size_t quads, __m256i* dots) {
  __m256i low[kRows], high[kRows];  // channels 0..3 and 4..7, two lanes each
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) low[r] = high[r] = _mm256_setzero_si256();
  for (size_t quad = 0; quad < quads; ++quad) {
    const __m256i weights = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + quad * 32));
    const __m256i w_low = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(weights));
    const __m256i w_high = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(weights, 1));
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) {
      const __m256i a =
          _mm256_cvtepu8_epi16(_mm256_castsi256_si128(broadcast_quad(rows[r], first_input + quad * kQuad)));
      low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(a, w_low));
      high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(a, w_high));
    }
  }
  // hadd pairs lanes within 128-bit halves: [c0 c1 c4 c5 | c2 c3 c6 c7], then reorder.
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    dots[r] = _mm256_permute4x64_epi64(_mm256_hadd_epi32(low[r], high[r]), 0xD8);
  }
}

// kRows rows times kGroups groups of a panel at a time, block by block.
template <bool kFourBit, size_t kRows, size_t kGroups>
ETNA_AVX2_TARGET void dot_rows_avx2_tile(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points,
                                         float* sums) {
  static_assert(kPanelGroups % kGroups == 0, "a tile takes whole parts of a panel");
  const PanelLayout& layout = w.layout;
  for (size_t first_group = 0; first_group < w.padded_out / kColumns; first_group += kGroups) {
    __m256 acc[kRows * kGroups];
    ETNA_UNROLL
    for (__m256& a : acc) a = _mm256_setzero_ps();
    for (size_t b = 0; b < layout.blocks; ++b) {
      if (kFourBit && layout.blockwise) prefetch_ahead(w, first_group, kGroups, b);
      ETNA_UNROLL
      for (size_t g = 0; g < kGroups; ++g) {
        const uint8_t* codes = w.codes + layout.group_block(first_group + g, b);
        __m256i dots[kRows];
        if (kFourBit) {
          block_dots_four_bit<kRows>(codes, rows, b * layout.block_length, layout.quads_per_block, dots);
        } else {
          block_dots_eight_bit<kRows>(codes, rows, b * layout.block_length, layout.quads_per_block, dots);
        }
        const BlockTerms terms = block_terms(w, first_group + g, b);
        ETNA_UNROLL
        for (size_t r = 0; r < kRows; ++r) {
          acc[r * kGroups + g] = accumulate_block(w, terms, zero_points[r], dots[r], acc[r * kGroups + g]);
        }
      }
    }
    store_tile<kRows, kGroups>(w, zero_points, first_group, acc, sums);
  }
}

template <bool kFourBit>
void dot_rows_avx2(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  size_t r = 0;
  for (; r + 4 <= row_count; r += 4) {
    dot_rows_avx2_tile<kFourBit, 4, 1>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  for (; r < row_count; ++r) {
    dot_rows_avx2_tile<kFourBit, 1, kPanelGroups>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
}

// AVX-512 VNNI on 256-bit registers (EVEX-encoded ymm): vpdpbusd multiplies
// unsigned activation bytes by signed weight bytes and adds each lane's four
// products straight into int32, so neither 8-bit nor 4-bit weights need the
// int16 steps above. The sums are exact, hence equal to the other paths'.
#define ETNA_VNNI_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni")))

// kRows rows times kGroups consecutive groups of 8 channels over one block
// (codes: the first group's, the next ones group_block_bytes apart):
// dots[r * kGroups + g], lane j for channel j of group g. A vpdpbusd result
// feeds the next one on the same register only after several cycles. A tile
// of fewer than 8 (row, group) pairs gives each pair two accumulators (even
// and odd quads) to hide that; from 8 pairs on, the pairs alone hide it, and
// one accumulator each leaves the 32 registers to the tile.
template <bool kFourBit, size_t kRows, size_t kGroups>
ETNA_VNNI_TARGET inline void block_dots_vnni(const uint8_t* codes, size_t group_block_bytes, const uint8_t* const* rows,
                                             size_t first_input, size_t quads, __m256i* dots) {
  constexpr size_t kPairs = kRows * kGroups;
  constexpr bool kSplitQuads = kPairs < 8;
  __m256i even[kPairs], odd[kSplitQuads ? kPairs : 1];
  ETNA_UNROLL
  for (size_t i = 0; i < kPairs; ++i) even[i] = _mm256_setzero_si256();
  ETNA_UNROLL
  for (__m256i& o : odd) o = _mm256_setzero_si256();
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i zero_code = _mm256_set1_epi8(kFourBitZero);
  for (size_t quad = 0; quad < quads; quad += 2) {
    __m256i even_weights[kGroups], odd_weights[kGroups];
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      const uint8_t* group_codes = codes + g * group_block_bytes;
      if (kFourBit) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group_codes + quad / 2 * 32));
        even_weights[g] = _mm256_sub_epi8(_mm256_and_si256(packed, low_nibbles), zero_code);
        odd_weights[g] = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles), zero_code);
      } else {
        even_weights[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group_codes + quad * 32));
        odd_weights[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group_codes + (quad + 1) * 32));
      }
    }
    const size_t k = first_input + quad * kQuad;
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) {
      const __m256i a_even = broadcast_quad(rows[r], k);
      const __m256i a_odd = broadcast_quad(rows[r], k + kQuad);
      ETNA_UNROLL
      for (size_t g = 0; g < kGroups; ++g) {
        const size_t pair = r * kGroups + g;
        even[pair] = _mm256_dpbusd_epi32(even[pair], a_even, even_weights[g]);
        if constexpr (kSplitQuads) {
          odd[pair] = _mm256_dpbusd_epi32(odd[pair], a_odd, odd_weights[g]);
        } else {
          even[pair] = _mm256_dpbusd_epi32(even[pair], a_odd, odd_weights[g]);
        }
      }
    }
  }
  ETNA_UNROLL
  for (size_t i = 0; i < kPairs; ++i) dots[i] = kSplitQuads ? _mm256_add_epi32(even[i], odd[i]) : even[i];
}

// Starts on a 64-byte boundary: the decode tile's inner loop ran 10-15%
// slower at some placements relative to the front end's 64-byte windows.
template <bool kFourBit, size_t kRows, size_t kGroups>
__attribute__((aligned(64))) ETNA_VNNI_TARGET void dot_rows_vnni_tile(const PackedView& w, const uint8_t* const* rows,
                                                                      const int32_t* zero_points, size_t first_group,
                                                                      float* sums) {
  const PanelLayout& layout = w.layout;
  __m256 acc[kRows * kGroups];
  ETNA_UNROLL
  for (__m256& a : acc) a = _mm256_setzero_ps();
  for (size_t b = 0; b < layout.blocks; ++b) {
    if (kFourBit && layout.blockwise) prefetch_ahead(w, first_group, kGroups, b);
    __m256i dots[kRows * kGroups];
    block_dots_vnni<kFourBit, kRows, kGroups>(w.codes + layout.group_block(first_group, b), layout.group_block_bytes,
                                              rows, b * layout.block_length, layout.quads_per_block, dots);
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      const BlockTerms terms = block_terms(w, first_group + g, b);
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        acc[r * kGroups + g] = accumulate_block(w, terms, zero_points[r], dots[r * kGroups + g], acc[r * kGroups + g]);
      }
    }
  }
  store_tile<kRows, kGroups>(w, zero_points, first_group, acc, sums);
}

// The same products for kRows rows and two consecutive groups at once, on
// 512-bit registers (group g in the low half, g + 1 in the high one): a
// broadcast of four activations and a vpdpbusd serve 16 channels, which
// halves the instructions per product of the 256-bit tile. Each (row, block)
// sum is the same exact integer, scaled and accumulated in the same order,
// so the results are the same bits. For 64 rows of a 768 x 2048 4-bit layer
// (one thread): 0.97 ms with 4 rows of one 256-bit group, 0.62 ms with 8,
// 0.41 ms with 8 rows of two groups here. A single row stays on 256 bits,
// which streams the weights of decode no slower.
// GCC 12 takes the undefined pass-through operand inside AVX-512 intrinsics
// (insert, extract, convert) for an uninitialized read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define ETNA_VNNI512_TARGET __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

ETNA_VNNI512_TARGET inline __m512i join_halves(__m256i low, __m256i high) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(low), high, 1);
}

ETNA_VNNI512_TARGET inline __m512i load_two_groups(const uint8_t* low, const uint8_t* high) {
  return join_halves(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low)),
                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high)));
}

// kRows (8 or more, so that their accumulators hide vpdpbusd's latency) rows.
template <bool kFourBit, size_t kRows>
ETNA_VNNI512_TARGET void dot_rows_vnni512_tile(const PackedView& w, const uint8_t* const* rows,
                                               const int32_t* zero_points, size_t first_group, float* sums) {
  static_assert(kRows >= 8, "fewer rows leave vpdpbusd waiting on itself");
  const PanelLayout& layout = w.layout;
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  const __m512i zero_code = _mm512_set1_epi8(kFourBitZero);
  __m512 acc[kRows];
  ETNA_UNROLL
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (size_t b = 0; b < layout.blocks; ++b) {
    if (kFourBit && layout.blockwise) prefetch_ahead(w, first_group, 2, b);
    const uint8_t* low = w.codes + layout.group_block(first_group, b);
    const uint8_t* high = low + layout.group_block_bytes;
    __m512i dots[kRows];
    ETNA_UNROLL
    for (__m512i& d : dots) d = _mm512_setzero_si512();
    for (size_t quad = 0; quad < layout.quads_per_block; quad += 2) {
      __m512i even_weights, odd_weights;
      if (kFourBit) {
        const __m512i packed = load_two_groups(low + quad / 2 * 32, high + quad / 2 * 32);
        even_weights = _mm512_sub_epi8(_mm512_and_si512(packed, low_nibbles), zero_code);
        odd_weights = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles), zero_code);
      } else {
        even_weights = load_two_groups(low + quad * 32, high + quad * 32);
        odd_weights = load_two_groups(low + (quad + 1) * 32, high + (quad + 1) * 32);
      }
      const size_t k = b * layout.block_length + quad * kQuad;
      ETNA_UNROLL
      for (size_t r = 0; r < kRows; ++r) {
        int32_t even_quad, odd_quad;
        std::memcpy(&even_quad, rows[r] + k, sizeof even_quad);
        std::memcpy(&odd_quad, rows[r] + k + kQuad, sizeof odd_quad);
        dots[r] = _mm512_dpbusd_epi32(dots[r], _mm512_set1_epi32(even_quad), even_weights);
        dots[r] = _mm512_dpbusd_epi32(dots[r], _mm512_set1_epi32(odd_quad), odd_weights);
      }
    }
    const BlockTerms low_terms = block_terms(w, first_group, b), high_terms = block_terms(w, first_group + 1, b);
    const __m512 scales =
        _mm512_castsi512_ps(join_halves(_mm256_castps_si256(low_terms.scales), _mm256_castps_si256(high_terms.scales)));
    const __m512i weight_sums = join_halves(low_terms.weight_sums, high_terms.weight_sums);
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) {
      __m512i dot = dots[r];
      if (!layout.blockwise) {
        dot = _mm512_sub_epi32(dot, _mm512_mullo_epi32(_mm512_set1_epi32(zero_points[r]), weight_sums));
      }
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scales, acc[r]);
    }
  }
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    float* out = sums + r * w.padded_out + first_group * kColumns;
    _mm256_storeu_ps(out, finish_channels(w, first_group, zero_points[r], _mm512_castps512_ps256(acc[r])));
    _mm256_storeu_ps(out + kColumns,
                     finish_channels(w, first_group + 1, zero_points[r],
                                     _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1))));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// kRows rows over every group, two at a time on 512-bit registers.
template <bool kFourBit, size_t kRows>
void dot_rows_vnni512_groups(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, float* sums) {
  static_assert(kPanelGroups % 2 == 0, "panels hold whole pairs of groups");
  for (size_t g = 0; g < w.padded_out / kColumns; g += 2) {
    dot_rows_vnni512_tile<kFourBit, kRows>(w, rows, zero_points, g, sums);
  }
}

// kRows rows over every group, kGroups groups at a time.
template <bool kFourBit, size_t kRows, size_t kGroups>
void dot_rows_vnni_groups(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, float* sums) {
  static_assert(kPanelGroups % kGroups == 0, "a tile takes whole parts of a panel");
  for (size_t g = 0; g < w.padded_out / kColumns; g += kGroups) {
    dot_rows_vnni_tile<kFourBit, kRows, kGroups>(w, rows, zero_points, g, sums);
  }
}

template <bool kFourBit>
void dot_rows_vnni(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  size_t r = 0;
  for (; r + 8 <= row_count; r += 8) {
    dot_rows_vnni512_groups<kFourBit, 8>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  for (; r + 4 <= row_count; r += 4) {
    dot_rows_vnni_groups<kFourBit, 4, 2>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  for (; r < row_count; ++r) {
    dot_rows_vnni_groups<kFourBit, 1, kPanelGroups>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
}

// row_range_scalar and quantize_values_scalar 8 values at a time, with the
// same bits: minimum and
// maximum are exact, so lanes may take them in any order; maxps(v, low)
// gives `low` for a NaN v, as fmax does; vroundps rounds as nearbyint does
// in the default rounding mode.
ETNA_AVX2_TARGET RowRange row_range_avx2(const float* x, size_t count) {
  const __m256 zero = _mm256_setzero_ps();
  // Four sets of lanes, so that no step waits on the one before.
  __m256 lo[4] = {zero, zero, zero, zero}, hi[4] = {zero, zero, zero, zero}, probe[4] = {zero, zero, zero, zero};
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    ETNA_UNROLL
    for (size_t u = 0; u < 4; ++u) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * u);
      lo[u] = _mm256_min_ps(lo[u], v);
      hi[u] = _mm256_max_ps(hi[u], v);
      probe[u] = _mm256_add_ps(probe[u], _mm256_mul_ps(v, zero));
    }
  }
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    lo[0] = _mm256_min_ps(lo[0], v);
    hi[0] = _mm256_max_ps(hi[0], v);
    probe[0] = _mm256_add_ps(probe[0], _mm256_mul_ps(v, zero));
  }
  for (size_t u = 1; u < 4; ++u) {
    lo[0] = _mm256_min_ps(lo[0], lo[u]);
    hi[0] = _mm256_max_ps(hi[0], hi[u]);
    probe[0] = _mm256_add_ps(probe[0], probe[u]);
  }
  alignas(32) float lanes_lo[8], lanes_hi[8], lanes_probe[8];
  _mm256_store_ps(lanes_lo, lo[0]);
  _mm256_store_ps(lanes_hi, hi[0]);
  _mm256_store_ps(lanes_probe, probe[0]);
  RowRange range = row_range_scalar(x + i, count - i);
  float probe_sum = range.finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  for (size_t lane = 0; lane < 8; ++lane) {
    range.lo = std::fmin(range.lo, lanes_lo[lane]);
    range.hi = std::fmax(range.hi, lanes_hi[lane]);
    probe_sum += lanes_probe[lane];
  }
  range.finite = probe_sum == 0.0f;
  return range;
}

ETNA_AVX2_TARGET void quantize_values_avx2(const float* x, size_t count, float multiplier, float low, float high,
                                           int32_t offset, uint8_t* q) {
  const __m256 scale = _mm256_set1_ps(multiplier), lows = _mm256_set1_ps(low), highs = _mm256_set1_ps(high);
  const __m256i offsets = _mm256_set1_epi32(offset);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale), lows), highs);
    const __m256i codes = _mm256_add_epi32(
        _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), offsets);
    // Codes are 0..255: two unsigned-saturating packs keep them in order.
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packus_epi16(words, words));
  }
  quantize_values_scalar(x + i, count - i, multiplier, low, high, offset, q + i);
}

}  // namespace

// AVX2 widens 4-bit products to int32 every kSimdBlock input channels.
const PathKernels kAvx2Kernels{kSimdBlock, dot_rows_avx2<false>, dot_rows_avx2<true>, row_range_avx2,
                               quantize_values_avx2};
// VNNI reads two quads (8 input channels) per load; rows convert as on AVX2.
const PathKernels kAvx512VnniKernels{2 * kQuad, dot_rows_vnni<false>, dot_rows_vnni<true>, row_range_avx2,
                                     quantize_values_avx2};

}  // namespace etna::xnn::dynamic_linear_detail

#endif  // x86
