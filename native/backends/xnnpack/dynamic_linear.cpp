#include "backends/xnnpack/dynamic_linear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ETNA_DYNQUANT_X86 1
#endif

#include "backends/xnnpack/output_bounds.h"
#include "backends/xnnpack/parallel.h"

namespace etna::xnn {
namespace {

constexpr size_t kChunk = 64;       // per-channel layouts pad input channels to a multiple of this
constexpr size_t kSimdBlock = 32;   // AVX2 runs blocks of a multiple of this many input channels
constexpr size_t kColumns = 8;      // output channels a register holds: a group
constexpr size_t kPanelGroups = 4;  // groups stored as one run of memory: a panel
constexpr size_t kPanelChannels = kPanelGroups * kColumns;
constexpr size_t kQuad = 4;             // input channels of one channel side by side
constexpr int kFourBitZero = 8;         // 4-bit codes store value + 8, as the exporter writes them
constexpr size_t kTileRows = 16;        // activation rows a task multiplies at once
constexpr size_t kPrefetchBlocks = 16;  // how many blocks ahead the vector tiles ask for blockwise weights

// A column block's packed weights: about what stays in a core's L2 cache
// while a batch's row tiles pass over them.
constexpr size_t kBlockWeightBytes = size_t{128} << 10;
constexpr size_t kMaxBlockGroups = 32;  // 256 channels: a task's sums stay a 16 KiB stack array

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// bf16 is the high half of an fp32.
float bf16_value(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

struct CodePlace {
  size_t byte;
  bool high_nibble;
};

// Where the packed weights put each byte. Channels come in panels of 32 (four
// groups of 8), and a panel is one run of memory, block after block of input
// channels: each block holds the four groups' codes, then, in blockwise
// layouts, the block's 32 bf16 scales. A single row (decode) so reads its
// weights as one sequential stream. In a standalone 4-bit GEMV over 57 MB on
// one core, 12 streams (four groups' codes, scales and weight sums) read
// 26 GB/s and one stream 36 GB/s, the core's plain read speed.
//
// Within a group's block, each quad t of input channels (4t..4t+3) is 32
// bytes: channel j's four codes at bytes 4j..4j+3, so one register times a
// broadcast of 4 activations gives all 8 channels. 8-bit codes are int8
// weights; 4-bit codes are weight + 8, quads 2u and 2u + 1 sharing 32 bytes
// (low and high nibbles). Per-channel layouts are one block of all the
// (padded) input channels, whose scales are the channels' own.
struct PanelLayout {
  size_t block_length = 0;  // input channels per block
  size_t blocks = 0;
  bool four_bit = false;
  bool blockwise = false;
  size_t quads_per_block = 0;    // quads of a block, in whole pairs: the vector tiles read two a step
  size_t group_block_bytes = 0;  // one group's codes for one block
  size_t block_bytes = 0;        // a panel's codes and scales for one block
  size_t panel_bytes = 0;

  PanelLayout(size_t length, size_t block_count, bool four, bool block_scales)
      : block_length(length), blocks(block_count), four_bit(four), blockwise(block_scales) {
    quads_per_block = round_up(length, 2 * kQuad) / kQuad;
    group_block_bytes = quads_per_block * (four ? kQuad / 2 : kQuad) * kColumns;
    block_bytes = kPanelGroups * group_block_bytes + (blockwise ? kPanelChannels * sizeof(uint16_t) : 0);
    panel_bytes = blocks * block_bytes;
  }
  // Offsets from the first panel: group g's codes for block b, and its 8 scales.
  size_t group_block(size_t group, size_t block) const {
    return group / kPanelGroups * panel_bytes + block * block_bytes + group % kPanelGroups * group_block_bytes;
  }
  size_t block_scales(size_t group, size_t block) const {
    return group / kPanelGroups * panel_bytes + block * block_bytes + kPanelGroups * group_block_bytes +
           group % kPanelGroups * kColumns * sizeof(uint16_t);
  }
  // Where the code of (channel n, input k) lives.
  CodePlace code_place(size_t n, size_t k) const {
    const size_t within = k % block_length, quad = within / kQuad;
    return {group_block(n / kColumns, k / block_length) + (four_bit ? quad / 2 : quad) * 32 + n % kColumns * kQuad +
                within % kQuad,
            four_bit && quad % 2 == 1};
  }
};

// What the dot-product paths read: the packed weights of some panels.
struct PackedView {
  const uint8_t* codes;  // the first panel
  PanelLayout layout;
  size_t padded_out;  // channels: whole panels
  // Per-channel layouts: each channel's scale and signed weights summed. The
  // zero point comes off in integers, as in XNNPACK's qc8w and qc4w kernels,
  // so a row of zero-point codes (an all-zero input) sums to exactly 0.
  const float* channel_scales;
  const int32_t* weight_sums;
  // Blockwise layouts: per channel, the blocks' scales times their weight
  // sums, summed in block order with fused multiply-adds, which the zero point
  // multiplies once after the blocks, as in XNNPACK's qb4w kernels. Per-block
  // sums would add a fifth to the bytes a decode step reads.
  const float* scaled_sums;
};

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
  return bf16_value(bits);
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

#ifdef ETNA_DYNQUANT_X86

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
    ETNA_UNROLL
    for (size_t r = 0; r < kRows; ++r) {
      ETNA_UNROLL
      for (size_t g = 0; g < kGroups; ++g) {
        _mm256_storeu_ps(sums + r * w.padded_out + (first_group + g) * kColumns,
                         finish_channels(w, first_group + g, zero_points[r], acc[r * kGroups + g]));
      }
    }
  }
}

template <bool kFourBit>
void dot_rows_avx2_typed(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                         float* sums) {
  size_t r = 0;
  for (; r + 4 <= row_count; r += 4) {
    dot_rows_avx2_tile<kFourBit, 4, 1>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
  for (; r < row_count; ++r) {
    dot_rows_avx2_tile<kFourBit, 1, kPanelGroups>(w, rows + r, zero_points + r, sums + r * w.padded_out);
  }
}

void dot_rows_avx2(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  if (w.layout.four_bit) {
    dot_rows_avx2_typed<true>(w, rows, zero_points, row_count, sums);
  } else {
    dot_rows_avx2_typed<false>(w, rows, zero_points, row_count, sums);
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
  ETNA_UNROLL
  for (size_t r = 0; r < kRows; ++r) {
    ETNA_UNROLL
    for (size_t g = 0; g < kGroups; ++g) {
      _mm256_storeu_ps(sums + r * w.padded_out + (first_group + g) * kColumns,
                       finish_channels(w, first_group + g, zero_points[r], acc[r * kGroups + g]));
    }
  }
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
void dot_rows_vnni_typed(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
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

void dot_rows_vnni(const PackedView& w, const uint8_t* const* rows, const int32_t* zero_points, size_t row_count,
                   float* sums) {
  if (w.layout.four_bit) {
    dot_rows_vnni_typed<true>(w, rows, zero_points, row_count, sums);
  } else {
    dot_rows_vnni_typed<false>(w, rows, zero_points, row_count, sums);
  }
}

#endif  // ETNA_DYNQUANT_X86

// -1: no forced path.
std::atomic<int> forced_path{-1};

// Whether the CPU (and, for AVX-512, the OS's saved register state: the
// compiler's CPU check requires both) runs `path`.
bool cpu_runs(DotPath path) {
#ifdef ETNA_DYNQUANT_X86
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  switch (path) {
    case DotPath::kScalar: return true;
    case DotPath::kAvx2: return avx2;
    case DotPath::kAvx512Vnni: return vnni;
  }
  return false;
#else
  return path == DotPath::kScalar;
#endif
}

DotPath best_available_path() {
  for (DotPath path : {DotPath::kAvx512Vnni, DotPath::kAvx2}) {
    if (cpu_runs(path)) return path;
  }
  return DotPath::kScalar;
}

// Blocks a vector path reads whole: AVX2 widens 4-bit products to int32 every
// 32 input channels; VNNI reads two quads (8 input channels) per load.
bool path_takes_blocks(DotPath path, size_t block_length) {
  switch (path) {
    case DotPath::kScalar: return true;
    case DotPath::kAvx2: return block_length % kSimdBlock == 0;
    case DotPath::kAvx512Vnni: return block_length % (2 * kQuad) == 0;
  }
  return false;
}

// A row's range: the least and greatest of 0 and its values, and whether
// every value is finite.
struct RowRange {
  float lo = 0.0f, hi = 0.0f;
  bool finite = true;
};

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

// q[i] = round(clamp(x[i] * multiplier, low, high)) + offset, rounded to
// nearest, ties to even. fmax puts NaN (an infinity times a zero
// multiplier) at `low`.
void quantize_values_scalar(const float* x, size_t count, float multiplier, float low, float high, int32_t offset,
                            uint8_t* q) {
  for (size_t i = 0; i < count; ++i) {
    const float v = std::fmin(std::fmax(x[i] * multiplier, low), high);
    q[i] = static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(v)) + offset);
  }
}

#ifdef ETNA_DYNQUANT_X86

// The same two steps 8 values at a time, with the same bits: minimum and
// maximum are exact, so lanes may take them in any order; maxps(v, low)
// gives `low` for a NaN v, as fmax does; vroundps rounds as nearbyint does
// in the default rounding mode.
__attribute__((target("avx2,fma"))) RowRange row_range_avx2(const float* x, size_t count) {
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

__attribute__((target("avx2,fma"))) void quantize_values_avx2(const float* x, size_t count, float multiplier, float low,
                                                              float high, int32_t offset, uint8_t* q) {
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

#endif  // ETNA_DYNQUANT_X86

// One row into its codes (stored plus 128, see DynamicRowParams) and parameters.
DynamicRowParams quantize_row(const float* x, size_t count, bool avx2, uint8_t* q) {
  RowRange range;
#ifdef ETNA_DYNQUANT_X86
  range = avx2 ? row_range_avx2(x, count) : row_range_scalar(x, count);
#else
  (void)avx2;
  range = row_range_scalar(x, count);
#endif
  float multiplier = 1.0f;
  DynamicRowParams row = row_params(range, multiplier);
  const float low = static_cast<float>(-128 - row.zero_point), high = static_cast<float>(127 - row.zero_point);
  const int32_t offset = row.zero_point + 128;
#ifdef ETNA_DYNQUANT_X86
  if (avx2) {
    quantize_values_avx2(x, count, multiplier, low, high, offset, q);
  } else {
    quantize_values_scalar(x, count, multiplier, low, high, offset, q);
  }
#else
  quantize_values_scalar(x, count, multiplier, low, high, offset, q);
#endif
  row.zero_point += 128;
  return row;
}

// What packing reads: the filter as the exporter wrote it ([N, K], or [K, N]
// when transposed; 4-bit rows as weight + 8, two a byte, the even element in
// the low nibble, each row padded to whole bytes) and its scales.
struct PackSource {
  const uint8_t* codes;
  const ScaleList& scales;
  size_t out_channels, in_channels, row_bytes;
  bool transposed;
};

// Where packing writes (DynamicLinear's arrays; those a layout lacks are null).
struct PackTarget {
  uint8_t* codes;
  float* channel_scales;
  int32_t* weight_sums;
  float* scaled_sums;
};

// Packs panels [first, end): codes, scales and per-channel terms, in block
// order per channel. False when a blockwise scale is not a bf16 value (the
// payload reader makes every one of them bf16, rounding fp32 ones as upstream
// does, so their high halves hold them). Inlined into a plain and an AVX2 and
// FMA build: the fused multiply-adds of the scaled sums are then instructions
// rather than library calls, and the compiler vectorizes more.
__attribute__((always_inline)) inline bool pack_panels_body(const PanelLayout& layout, const PackSource& from,
                                                            const PackTarget& to, size_t first, size_t end) {
  const size_t n_count = from.out_channels, k_count = from.in_channels;
  const float* scales = from.scales.data();
  bool bf16 = true;
  // Channel n's codes for block b, in place; returns its signed weights summed.
  auto pack_block = [&](size_t n, size_t b) {
    const size_t begin = b * layout.block_length, stop = std::min(k_count, begin + layout.block_length);
    int32_t weight_sum = 0;
    // The exporter's 4-bit rows, eight input channels (four bytes) at a time:
    // packed byte r of quad pair u holds the codes of channels 8u + r (low
    // nibble) and 8u + 4 + r (high), the same values as the source's, so no
    // code is decoded. Where it applies, it writes what the loop below does.
    if (layout.four_bit && k_count % 8 == 0 && layout.block_length % 8 == 0) {
      const uint8_t* source = from.codes + n * from.row_bytes + begin / 2;
      uint8_t* packed = to.codes + layout.group_block(n / kColumns, b) + n % kColumns * kQuad;
      const size_t pairs = (stop - begin) / 8;
      size_t u = 0;
#ifdef __SSE2__
      // Four pairs (16 bytes) at a time, the same bytes: each 32-bit lane of
      // the nibbles interleaved low, high holds two of a pair's four codes.
      const __m128i low_nibbles = _mm_set1_epi8(0x0F);
      for (; u + 4 <= pairs; u += 4, source += 16, packed += 128) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
        const __m128i low = _mm_and_si128(bytes, low_nibbles);
        const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibbles);
        const __m128i sums =
            _mm_add_epi64(_mm_sad_epu8(low, _mm_setzero_si128()), _mm_sad_epu8(high, _mm_setzero_si128()));
        weight_sum += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(sums, sums));
        for (size_t half = 0; half < 2; ++half) {
          const __m128i mixed = half ? _mm_unpackhi_epi8(low, high) : _mm_unpacklo_epi8(low, high);
          const __m128i lanes = _mm_shuffle_epi32(mixed, _MM_SHUFFLE(3, 1, 2, 0));
          const __m128i joined = _mm_or_si128(lanes, _mm_slli_epi16(_mm_srli_si128(lanes, 8), 4));
          const int32_t first_pair = _mm_cvtsi128_si32(joined),
                        second_pair = _mm_cvtsi128_si32(_mm_srli_si128(joined, 4));
          std::memcpy(packed + half * 64, &first_pair, sizeof first_pair);
          std::memcpy(packed + half * 64 + 32, &second_pair, sizeof second_pair);
        }
      }
#endif
      for (; u < pairs; ++u, source += 4, packed += 32) {
        packed[0] = static_cast<uint8_t>((source[0] & 0x0F) | (source[2] << 4));
        packed[1] = static_cast<uint8_t>((source[0] >> 4) | (source[2] & 0xF0));
        packed[2] = static_cast<uint8_t>((source[1] & 0x0F) | (source[3] << 4));
        packed[3] = static_cast<uint8_t>((source[1] >> 4) | (source[3] & 0xF0));
        for (size_t i = 0; i < 4; ++i) weight_sum += (source[i] & 0x0F) + (source[i] >> 4);
      }
      return weight_sum - kFourBitZero * static_cast<int32_t>(stop - begin);
    }
    for (size_t k = begin; k < stop; ++k) {
      int w;
      if (layout.four_bit) {
        const uint8_t byte = from.codes[n * from.row_bytes + k / 2];
        w = ((k % 2) ? byte >> 4 : byte & 0xF) - kFourBitZero;
      } else {
        w = static_cast<int8_t>(from.transposed ? from.codes[k * n_count + n] : from.codes[n * from.row_bytes + k]);
      }
      weight_sum += w;
      const CodePlace place = layout.code_place(n, k);
      uint8_t& byte = to.codes[place.byte];
      if (layout.four_bit) {
        const uint8_t code = static_cast<uint8_t>(w + kFourBitZero);
        byte = place.high_nibble ? static_cast<uint8_t>((byte & 0x0F) | (code << 4))
                                 : static_cast<uint8_t>((byte & 0xF0) | code);
      } else {
        byte = static_cast<uint8_t>(static_cast<int8_t>(w));
      }
    }
    return weight_sum;
  };
  for (size_t n = first * kPanelChannels; n < end * kPanelChannels; ++n) {
    if (!layout.blockwise) {
      to.channel_scales[n] = n < n_count ? scales[n] : 0.0f;
      to.weight_sums[n] = n < n_count ? pack_block(n, 0) : 0;
      continue;
    }
    float scaled_sum = 0.0f;
    for (size_t b = 0; b < layout.blocks; ++b) {
      const float scale = n < n_count ? scales[n * layout.blocks + b] : 0.0f;
      uint32_t bits;
      std::memcpy(&bits, &scale, sizeof bits);
      bf16 &= (bits & 0xFFFF) == 0;
      const auto high = static_cast<uint16_t>(bits >> 16);
      std::memcpy(to.codes + layout.block_scales(n / kColumns, b) + n % kColumns * sizeof high, &high, sizeof high);
      const int32_t weight_sum = n < n_count ? pack_block(n, b) : 0;
      scaled_sum = std::fma(static_cast<float>(weight_sum), scale, scaled_sum);
    }
    to.scaled_sums[n] = scaled_sum;
  }
  return bf16;
}

bool pack_panels(const PanelLayout& layout, const PackSource& from, const PackTarget& to, size_t first, size_t end) {
  return pack_panels_body(layout, from, to, first, end);
}

#ifdef ETNA_DYNQUANT_X86
ETNA_AVX2_TARGET bool pack_panels_avx2(const PanelLayout& layout, const PackSource& from, const PackTarget& to,
                                       size_t first, size_t end) {
  return pack_panels_body(layout, from, to, first, end);
}
#endif

// Packs panels [first, end) with the build the dot-product path's CPU runs.
bool pack_panels_on(DotPath path, const PanelLayout& layout, const PackSource& from, const PackTarget& to, size_t first,
                    size_t end) {
#ifdef ETNA_DYNQUANT_X86
  if (path_has_avx2(path)) return pack_panels_avx2(layout, from, to, first, end);
#endif
  return pack_panels(layout, from, to, first, end);
}

}  // namespace

DotPath active_dot_path() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<DotPath>(forced) : best_available_path();
}

const char* dot_path_name(DotPath path) {
  switch (path) {
    case DotPath::kScalar: return "scalar";
    case DotPath::kAvx2: return "avx2";
    case DotPath::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool dot_path_available(DotPath path) { return cpu_runs(path); }

void force_dot_path(DotPath path) { forced_path.store(static_cast<int>(path), std::memory_order_relaxed); }
void clear_forced_dot_path() { forced_path.store(-1, std::memory_order_relaxed); }

Status quantize_per_token_kernel(const EtnaKernelCall& call) {
  const Shape& shape = call.shapes[call.node.outputs[0]];
  const size_t row_length = dynamic_row_length(shape, call.graph.values[call.node.outputs[0]].quant.nonbatch_dims);
  const size_t rows = row_length ? shape.numel() / row_length : 0;
  const float* input = static_cast<const float*>(call.data[call.node.inputs[0]]);
  uint8_t* output = static_cast<uint8_t*>(call.data[call.node.outputs[0]]);
  auto* params = reinterpret_cast<DynamicRowParams*>(output + dynamic_params_offset(shape));
  const bool avx2 = path_has_avx2(active_dot_path());
  // Rows are independent: each task quantizes a run of whole rows.
  const size_t tasks = std::min(rows, task_count(call.threadpool, rows * row_length, kMinTaskElements));
  const size_t rows_per_task = block_size(rows, tasks, 1);
  parallel_for(pool_for(call.threadpool, tasks), divide_up(rows, rows_per_task), [&](size_t task) {
    const size_t end = std::min(rows, (task + 1) * rows_per_task);
    for (size_t r = task * rows_per_task; r < end; ++r) {
      const DynamicRowParams row = quantize_row(input + r * row_length, row_length, avx2, output + r * row_length);
      std::memcpy(params + r, &row, sizeof row);
    }
  });
  return Status::ok();
}

Result<std::unique_ptr<DynamicLinear>> DynamicLinear::create(const Graph& graph, const Node& node, pthreadpool_t pool) {
  const Value& filter = graph.values[node.inputs[1]];
  const Value* bias = node.inputs[2] == kNoValue ? nullptr : &graph.values[node.inputs[2]];
  const bool transposed = node.flags & 0x1;
  std::unique_ptr<DynamicLinear> linear(new DynamicLinear());
  DynamicLinear& l = *linear;
  l.out_channels_ = filter.shape.dims[transposed ? 1 : 0];
  l.in_channels_ = filter.shape.dims[transposed ? 0 : 1];
  l.padded_in_ = std::max(kChunk, round_up(l.in_channels_, kChunk));
  l.padded_out_ = std::max(kPanelChannels, round_up(l.out_channels_, kPanelChannels));
  const bool four_bit = is_four_bit(filter.datatype);
  const bool blockwise = filter.quant.kind == Quantization::Kind::kBlockwise;
  const size_t block_length = blockwise ? filter.quant.block_size : l.padded_in_;
  const size_t blocks = blockwise ? l.in_channels_ / block_length : 1;
  l.block_length_ = block_length;
  l.blocks_ = blocks;
  l.four_bit_ = four_bit;
  l.blockwise_ = blockwise;
  const PanelLayout layout(block_length, blocks, four_bit, blockwise);
  l.output_min_ = node.output_min;
  l.output_max_ = node.output_max;
  const size_t n_count = l.out_channels_, k_count = l.in_channels_;
  if (filter.constant.size < constant_bytes(filter.datatype, filter.shape)) {
    return make_error(ErrorCode::kInternal, node.describe() + ": filter bytes missing at packing");
  }

  l.codes_.assign(l.padded_out_ / kPanelChannels * layout.panel_bytes, four_bit ? 0x88 : 0);
  if (blockwise) {
    l.scaled_sums_.assign(l.padded_out_, 0.0f);
  } else {
    l.channel_scales_.assign(l.padded_out_, 0.0f);
    l.weight_sums_.assign(l.padded_out_, 0);
  }
  l.bias_.assign(l.padded_out_, 0.0f);
  const PackSource from{filter.constant.data,
                        filter.quant.channel_scales,
                        n_count,
                        k_count,
                        four_bit ? (k_count + 1) / 2 : k_count,
                        transposed};
  PackTarget to{l.codes_.data(), l.channel_scales_.data(), l.weight_sums_.data(), l.scaled_sums_.data()};
  // Panels split over the pool: each task writes its own panels' bytes only.
  const size_t panels = l.padded_out_ / kPanelChannels;
  const size_t tasks = std::min(panels, task_count(pool, l.codes_.size(), kMinTaskBytes));
  const DotPath path = active_dot_path();
  std::atomic<bool> scales_are_bf16{true};
  parallel_for(pool_for(pool, tasks), tasks, [&](size_t task) {
    const size_t first = task * panels / tasks, end = (task + 1) * panels / tasks;
    if (!pack_panels_on(path, layout, from, to, first, end)) scales_are_bf16.store(false, std::memory_order_relaxed);
  });
  if (!scales_are_bf16.load()) {
    return make_error(ErrorCode::kInternal, node.describe() + ": a block scale is not a bf16 value");
  }
  if (bias && bias->constant.size) std::memcpy(l.bias_.data(), bias->constant.data, n_count * sizeof(float));
  return linear;
}

size_t DynamicLinear::packed_bytes() const {
  return codes_.size() + (channel_scales_.size() + scaled_sums_.size() + bias_.size()) * sizeof(float) +
         weight_sums_.size() * sizeof(int32_t);
}

Status DynamicLinear::run(const Node& node, const Shape& input_shape, const void* input, float* output,
                          pthreadpool_t threadpool) const {
  const size_t row_length = input_shape.rank ? input_shape.dims[input_shape.rank - 1] : 1;
  if (row_length != in_channels_) {
    return make_error(ErrorCode::kInvalidInput, node.describe() + ": input rows have " + std::to_string(row_length) +
                                                    " elements, the filter takes " + std::to_string(in_channels_));
  }
  const size_t rows = row_count(input_shape);
  if (rows == 0) return Status::ok();
  const uint8_t* data = static_cast<const uint8_t*>(input);
  const auto* params = reinterpret_cast<const DynamicRowParams*>(data + dynamic_params_offset(input_shape));
  const PanelLayout layout(block_length_, blocks_, four_bit_, blockwise_);
  DotPath path = active_dot_path();
  if (!path_takes_blocks(path, block_length_)) path = DotPath::kScalar;

  // Tiles of up to kTileRows rows by a block of channel groups. A block's
  // weights stay in cache while the row tiles of a batch reuse them, and a
  // thread's run of tiles walks its own part of the weights (a single row
  // splits the channels only). Blocks are whole panels, which the single-row
  // vector tiles take at once.
  const size_t groups = padded_out_ / kColumns;
  const size_t group_weight_bytes = layout.panel_bytes / kPanelGroups;
  size_t block_groups = std::min(
      kMaxBlockGroups, std::max(kPanelGroups, kBlockWeightBytes / group_weight_bytes / kPanelGroups * kPanelGroups));
  const size_t row_tiles = divide_up(rows, kTileRows);
  const size_t tasks = task_count(threadpool, rows * padded_out_ * in_channels_, kMinTaskIntegerMacs);
  if (tasks > row_tiles)
    block_groups = std::min(block_groups, block_size(groups, divide_up(tasks, row_tiles), kPanelGroups));
  const size_t column_blocks = divide_up(groups, block_groups);

  const bool clamped = has_finite_bound(output_min_, output_max_);
  parallel_for_2d(pool_for(threadpool, tasks), column_blocks, row_tiles, [&](size_t column_block, size_t row_tile) {
    const size_t first_group = column_block * block_groups;
    const size_t group_count = std::min(block_groups, groups - first_group);
    const size_t first_channel = first_group * kColumns;
    auto from = [&](const auto& per_channel) {
      return per_channel.empty() ? nullptr : per_channel.data() + first_channel;
    };
    const PackedView view{codes_.data() + first_group / kPanelGroups * layout.panel_bytes,
                          layout,
                          group_count * kColumns,
                          from(channel_scales_),
                          from(weight_sums_),
                          from(scaled_sums_)};
    // Rows are read whole chunks at a time: the bytes past a row are the next
    // row's or the buffer's read padding, and meet zero weights.
    alignas(32) float sums[kTileRows * kMaxBlockGroups * kColumns];
    const uint8_t* tile_rows[kTileRows];
    DynamicRowParams tile_params[kTileRows];
    int32_t tile_zero_points[kTileRows];
    const size_t first = row_tile * kTileRows;
    const size_t count = std::min(kTileRows, rows - first);
    for (size_t r = 0; r < count; ++r) {
      tile_rows[r] = data + (first + r) * row_length;
      std::memcpy(&tile_params[r], params + first + r, sizeof tile_params[r]);
      tile_zero_points[r] = tile_params[r].zero_point;
    }
#ifdef ETNA_DYNQUANT_X86
    if (path == DotPath::kAvx512Vnni) {
      dot_rows_vnni(view, tile_rows, tile_zero_points, count, sums);
    } else if (path == DotPath::kAvx2) {
      dot_rows_avx2(view, tile_rows, tile_zero_points, count, sums);
    } else {
      dot_rows_scalar(view, tile_rows, tile_zero_points, count, sums);
    }
#else
    dot_rows_scalar(view, tile_rows, tile_zero_points, count, sums);
#endif
    // y = act_scale * (sum less the zero point's part) + bias, then the node's bounds.
    const size_t channels = std::min(out_channels_, first_channel + view.padded_out) - first_channel;
    for (size_t r = 0; r < count; ++r) {
      const float scale = tile_params[r].scale;
      float* out = output + (first + r) * out_channels_ + first_channel;
      const float* s = sums + r * view.padded_out;
      const float* bias = bias_.data() + first_channel;
      for (size_t n = 0; n < channels; ++n) out[n] = scale * s[n] + bias[n];
      if (clamped) clamp_keeping_nan(out, channels, output_min_, output_max_);
    }
  });
  return Status::ok();
}

}  // namespace etna::xnn
