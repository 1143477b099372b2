#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "backends/xnnpack/dynamic_linear_layout.h"
#include "core/bf16.h"

namespace etna::xnn::dynamic_linear_detail {
namespace {

// The body of pack_panels, inlined into a plain and an AVX2 and FMA build:
// the fused multiply-adds of the scaled sums are then instructions rather
// than library calls, and the compiler vectorizes more.
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
      bf16 &= is_bfloat16(scale);
      const uint16_t high = truncate_to_bfloat16(scale);
      std::memcpy(to.codes + layout.block_scales(n / kColumns, b) + n % kColumns * sizeof high, &high, sizeof high);
      const int32_t weight_sum = n < n_count ? pack_block(n, b) : 0;
      scaled_sum = std::fma(static_cast<float>(weight_sum), scale, scaled_sum);
    }
    to.scaled_sums[n] = scaled_sum;
  }
  return bf16;
}

bool pack_panels_plain(const PanelLayout& layout, const PackSource& from, const PackTarget& to, size_t first,
                       size_t end) {
  return pack_panels_body(layout, from, to, first, end);
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,fma"))) bool pack_panels_avx2(const PanelLayout& layout, const PackSource& from,
                                                          const PackTarget& to, size_t first, size_t end) {
  return pack_panels_body(layout, from, to, first, end);
}
#endif

}  // namespace

bool pack_panels(DotPath path, const PanelLayout& layout, const PackSource& from, const PackTarget& to, size_t first,
                 size_t end) {
#if defined(__x86_64__) || defined(__i386__)
  if (path_has_avx2(path)) return pack_panels_avx2(layout, from, to, first, end);
#else
  (void)path;
#endif
  return pack_panels_plain(layout, from, to, first, end);
}

}  // namespace etna::xnn::dynamic_linear_detail
