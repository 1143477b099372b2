#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "core/parallel.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ETNA_ATTENTION_X86 1
#include <immintrin.h>
#define ETNA_AVX2 __attribute__((target("avx2")))
#elif defined(__aarch64__)
#define ETNA_ATTENTION_NEON 1
#include <arm_neon.h>
#endif

#include "core/cpu_features.h"

namespace etna::kernels {
namespace {

// Query rows of one head that one unit of work takes: they read each tile of
// keys and values while it is in cache.
constexpr int64_t kRowBlock = 16;
// Bytes of keys (or values) in one tile: a good part of L1, so a block of
// rows reads them from there.
constexpr int64_t kKeyTileBytes = 16 * 1024;

int64_t keys_seen(const AttentionProblem& p, int64_t row) { return p.causal ? p.start_pos + row + 1 : p.visible; }

// softmax_exp (attention.h): y = n ln2 + r with ln2 in two parts (n times the
// first is exact), e^r by its degree-7 Taylor polynomial (|r| <= ln2 / 2),
// 2^n written into the exponent bits. Plain multiplies and adds, as the AVX2
// twin does lane by lane, so that both give the same bits; std::exp called
// once per score took most of a long prompt's attention time.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0.693145751953125f;  // few bits: n * kLn2High is exact
constexpr float kLn2Low = 1.428606765330187045e-06f;
constexpr float kExpFloor = -87.0f;
constexpr float kExpTaylor[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

// Sums of the softmax run in 8 lanes (score c into lane c % 8), added
// pairwise at the end, on every path: the AVX2 path's order.
constexpr int64_t kSumLanes = 8;

float add_lanes(const float* lanes) {
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The greatest of `start` and values[first, end); a NaN value is skipped.
float greatest(const float* values, int64_t first, int64_t end, float start) {
  for (int64_t c = first; c < end; ++c) {
    if (values[c] > start) start = values[c];
  }
  return start;
}

// scores[c] = exp(scores[c] - max_score) for c in [first, end), each added to
// lane c % kSumLanes.
void exp_into_lanes(float* scores, int64_t first, int64_t end, float max_score, float* lanes) {
  for (int64_t c = first; c < end; ++c) {
    scores[c] = softmax_exp(scores[c] - max_score);
    lanes[c % kSumLanes] += scores[c];
  }
}

// ---------------------------------------------------------------------------
// Portable path: plain loops, in the order the vector path keeps.

struct PortableOps {
  // exp(score - max) in place; returns their sum. A NaN score is skipped by
  // the max and makes the sum NaN; a row whose max is -inf or +inf gives
  // exp(NaN): NaN, as PyTorch's softmax does.
  static float softmax(float* scores, int64_t count) {
    const float max_score = greatest(scores, 0, count, -std::numeric_limits<float>::infinity());
    float lanes[kSumLanes] = {};
    exp_into_lanes(scores, 0, count, max_score, lanes);
    return add_lanes(lanes);
  }

  static constexpr bool kPacksKeys = false;

  // Scores of keys [begin, end) (cache positions) into scores[begin, end).
  static void score_keys(const float* q, const float* keys, int64_t kv_stride, const float* /*packed*/,
                         int64_t /*packed_width*/, int64_t /*tile*/, int64_t begin, int64_t end, int64_t dim,
                         float scale, const float* mask_row, float* scores) {
    for (int64_t c = begin; c < end; ++c) {
      const float* k = keys + c * kv_stride;
      float dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += q[d] * k[d];
      float score = dot * scale;
      if (mask_row != nullptr) score += mask_row[c];
      scores[c] = score;
    }
  }

  static void accumulate_values(const float* probabilities, const float* values, int64_t kv_stride, int64_t begin,
                                int64_t end, int64_t dim, float* acc) {
    for (int64_t c = begin; c < end; ++c) {
      const float weight = probabilities[c];
      const float* v = values + c * kv_stride;
      for (int64_t d = 0; d < dim; ++d) acc[d] += weight * v[d];
    }
  }
};

// ---------------------------------------------------------------------------
// AVX2 path, bit for bit the portable one: each score is the same sequence
// of float multiplies and adds over head_dim (lanes run over eight keys, from
// a transposed copy of the tile's keys), and each output accumulates the same
// products over keys (lanes run over head_dim). No FMA: a fused multiply-add
// rounds once where the portable loops round twice.

#ifdef ETNA_ATTENTION_X86

// Lanes below `count` (0..8) set.
ETNA_AVX2 inline __m256i lane_mask(int64_t count) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), index);
}

// scores[at .. at + 8) = dots * scale [+ mask].
ETNA_AVX2 inline void store_scores(__m256 dots, __m256 scale8, const float* mask_row, int64_t at, float* scores) {
  __m256 score = _mm256_mul_ps(dots, scale8);
  if (mask_row != nullptr) score = _mm256_add_ps(score, _mm256_loadu_ps(mask_row + at));
  _mm256_storeu_ps(scores + at, score);
}

// softmax_exp on 8 lanes, the same operations in the same order.
ETNA_AVX2 inline __m256 softmax_exp_avx2(__m256 y) {
  const __m256 in_range = _mm256_cmp_ps(y, _mm256_set1_ps(kExpFloor), _CMP_GE_OQ);
  const __m256 nan_lanes = _mm256_and_ps(_mm256_cmp_ps(y, y, _CMP_UNORD_Q), y);
  const __m256 x = _mm256_and_ps(in_range, y);  // lanes out of range compute e^0, then give way
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2High))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(kLn2Low)));
  __m256 p = _mm256_set1_ps(kExpTaylor[0]);
  for (size_t i = 1; i < sizeof kExpTaylor / sizeof kExpTaylor[0]; ++i) {
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(kExpTaylor[i]));
  }
  const __m256i two_to_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_blendv_ps(nan_lanes, _mm256_mul_ps(p, _mm256_castsi256_ps(two_to_n)), in_range);
}

struct Avx2Ops {
  static constexpr bool kPacksKeys = true;

  // PortableOps::softmax eight scores at a time: max is exact in any order,
  // and maxps(score, m) keeps m for a NaN score, as the portable compare does.
  ETNA_AVX2 static float softmax(float* scores, int64_t count) {
    const int64_t whole = count / kSumLanes * kSumLanes;
    __m256 maxima = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t c = 0; c < whole; c += kSumLanes) maxima = _mm256_max_ps(_mm256_loadu_ps(scores + c), maxima);
    alignas(32) float lanes[kSumLanes];
    _mm256_store_ps(lanes, maxima);
    const float max_score =
        greatest(scores, whole, count, greatest(lanes, 0, kSumLanes, -std::numeric_limits<float>::infinity()));
    const __m256 subtrahend = _mm256_set1_ps(max_score);
    __m256 sums = _mm256_setzero_ps();
    for (int64_t c = 0; c < whole; c += kSumLanes) {
      const __m256 e = softmax_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + c), subtrahend));
      _mm256_storeu_ps(scores + c, e);
      sums = _mm256_add_ps(sums, e);
    }
    _mm256_store_ps(lanes, sums);
    exp_into_lanes(scores, whole, count, max_score, lanes);
    return add_lanes(lanes);
  }

  // packed[d * width + i] = key (tile + i)'s element d, for keys [tile, end):
  // 8 x 8 blocks transposed in registers, the edges one by one.
  ETNA_AVX2 static void pack_keys(const float* keys, int64_t kv_stride, int64_t tile, int64_t end, int64_t dim,
                                  int64_t width, float* packed) {
    const int64_t whole_dims = dim / 8 * 8;
    int64_t c = tile;
    for (; c + 8 <= end; c += 8) {
      const float* k = keys + c * kv_stride;
      float* column = packed + (c - tile);
      for (int64_t d = 0; d < whole_dims; d += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(k + i * kv_stride + d);
        const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
        const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
        const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        float* at = column + d * width;
        _mm256_storeu_ps(at, _mm256_permute2f128_ps(s0, s4, 0x20));
        _mm256_storeu_ps(at + width, _mm256_permute2f128_ps(s1, s5, 0x20));
        _mm256_storeu_ps(at + 2 * width, _mm256_permute2f128_ps(s2, s6, 0x20));
        _mm256_storeu_ps(at + 3 * width, _mm256_permute2f128_ps(s3, s7, 0x20));
        _mm256_storeu_ps(at + 4 * width, _mm256_permute2f128_ps(s0, s4, 0x31));
        _mm256_storeu_ps(at + 5 * width, _mm256_permute2f128_ps(s1, s5, 0x31));
        _mm256_storeu_ps(at + 6 * width, _mm256_permute2f128_ps(s2, s6, 0x31));
        _mm256_storeu_ps(at + 7 * width, _mm256_permute2f128_ps(s3, s7, 0x31));
      }
      for (int i = 0; i < 8; ++i) {
        for (int64_t d = whole_dims; d < dim; ++d) column[d * width + i] = k[i * kv_stride + d];
      }
    }
    for (; c < end; ++c) {
      const float* k = keys + c * kv_stride;
      float* column = packed + (c - tile);
      for (int64_t d = 0; d < dim; ++d) column[d * width] = k[d];
    }
  }

  ETNA_AVX2 static void score_keys(const float* q, const float* keys, int64_t kv_stride, const float* packed,
                                   int64_t width, int64_t tile, int64_t begin, int64_t end, int64_t dim, float scale,
                                   const float* mask_row, float* scores) {
    const __m256 scale8 = _mm256_set1_ps(scale);
    int64_t c = begin;
    for (; c + 32 <= end; c += 32) {
      const float* column = packed + (c - tile);
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t d = 0; d < dim; ++d) {
        const __m256 qd = _mm256_broadcast_ss(q + d);
        const float* row = column + d * width;
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(qd, _mm256_loadu_ps(row)));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(qd, _mm256_loadu_ps(row + 8)));
        a2 = _mm256_add_ps(a2, _mm256_mul_ps(qd, _mm256_loadu_ps(row + 16)));
        a3 = _mm256_add_ps(a3, _mm256_mul_ps(qd, _mm256_loadu_ps(row + 24)));
      }
      store_scores(a0, scale8, mask_row, c, scores);
      store_scores(a1, scale8, mask_row, c + 8, scores);
      store_scores(a2, scale8, mask_row, c + 16, scores);
      store_scores(a3, scale8, mask_row, c + 24, scores);
    }
    for (; c + 8 <= end; c += 8) {
      const float* column = packed + (c - tile);
      __m256 a0 = _mm256_setzero_ps();
      for (int64_t d = 0; d < dim; ++d) {
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_broadcast_ss(q + d), _mm256_loadu_ps(column + d * width)));
      }
      store_scores(a0, scale8, mask_row, c, scores);
    }
    PortableOps::score_keys(q, keys, kv_stride, nullptr, 0, 0, c, end, dim, scale, mask_row, scores);
  }

  // acc[d] += p[c] * v[c][d] for c in order; up to eight vectors of head_dim
  // at a time, so that eight independent sums are in flight.
  ETNA_AVX2 static void accumulate_values(const float* probabilities, const float* values, int64_t kv_stride,
                                          int64_t begin, int64_t end, int64_t dim, float* acc) {
    const int64_t vectors = (dim + 7) / 8;
    const __m256i tail = lane_mask(dim - (vectors - 1) * 8);
    for (int64_t first = 0; first < vectors; first += 8) {
      const int64_t count = std::min<int64_t>(8, vectors - first);
      const bool has_tail = first + count == vectors && dim % 8 != 0;
      __m256 sums[8];
      for (int64_t j = 0; j < count; ++j) sums[j] = _mm256_loadu_ps(acc + (first + j) * 8);
      if (count == 8 && !has_tail) {
        for (int64_t c = begin; c < end; ++c) {
          const __m256 weight = _mm256_broadcast_ss(probabilities + c);
          const float* v = values + c * kv_stride + first * 8;
          for (int j = 0; j < 8; ++j)
            sums[j] = _mm256_add_ps(sums[j], _mm256_mul_ps(weight, _mm256_loadu_ps(v + j * 8)));
        }
      } else {
        const int64_t whole = has_tail ? count - 1 : count;
        for (int64_t c = begin; c < end; ++c) {
          const __m256 weight = _mm256_broadcast_ss(probabilities + c);
          const float* v = values + c * kv_stride + first * 8;
          for (int64_t j = 0; j < whole; ++j) {
            sums[j] = _mm256_add_ps(sums[j], _mm256_mul_ps(weight, _mm256_loadu_ps(v + j * 8)));
          }
          // Lanes past head_dim add weight * 0 to padding that is never read.
          if (has_tail) {
            sums[whole] = _mm256_add_ps(sums[whole], _mm256_mul_ps(weight, _mm256_maskload_ps(v + whole * 8, tail)));
          }
        }
      }
      for (int64_t j = 0; j < count; ++j) _mm256_storeu_ps(acc + (first + j) * 8, sums[j]);
    }
  }
};

#endif  // ETNA_ATTENTION_X86

#ifdef ETNA_ATTENTION_NEON

// ---------------------------------------------------------------------------
// NEON path (arm64), bit for bit the portable one in the AVX2 path's way:
// lanes over four keys (scores, from the transposed tile) or four elements of
// head_dim (values), never along a sum; separate multiplies and adds (the
// build does not contract them).

// scores[at .. at + 4) = dots * scale [+ mask].
inline void store_scores_neon(float32x4_t dots, float scale, const float* mask_row, int64_t at, float* scores) {
  float32x4_t score = vmulq_n_f32(dots, scale);
  if (mask_row != nullptr) score = vaddq_f32(score, vld1q_f32(mask_row + at));
  vst1q_f32(scores + at, score);
}

// softmax_exp on 4 lanes, the same operations in the same order.
inline float32x4_t softmax_exp_neon(float32x4_t y) {
  const uint32x4_t in_range = vcgeq_f32(y, vdupq_n_f32(kExpFloor));
  const uint32x4_t is_nan = vmvnq_u32(vceqq_f32(y, y));
  const float32x4_t nan_lanes = vreinterpretq_f32_u32(vandq_u32(is_nan, vreinterpretq_u32_f32(y)));
  // Lanes out of range compute e^0, then give way.
  const float32x4_t x = vreinterpretq_f32_u32(vandq_u32(in_range, vreinterpretq_u32_f32(y)));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, kLog2e));
  const float32x4_t r = vsubq_f32(vsubq_f32(x, vmulq_n_f32(n, kLn2High)), vmulq_n_f32(n, kLn2Low));
  float32x4_t p = vdupq_n_f32(kExpTaylor[0]);
  for (size_t i = 1; i < sizeof kExpTaylor / sizeof kExpTaylor[0]; ++i) {
    p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(kExpTaylor[i]));
  }
  const int32x4_t two_to_n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vbslq_f32(in_range, vmulq_f32(p, vreinterpretq_f32_s32(two_to_n)), nan_lanes);
}

struct NeonOps {
  static constexpr bool kPacksKeys = true;

  // PortableOps::softmax eight scores at a time (two registers: lanes 0..3
  // and 4..7 of kSumLanes): the maximum is exact in any order, and fmaxnm
  // keeps the other side for a NaN score, as the portable compare does.
  static float softmax(float* scores, int64_t count) {
    const int64_t whole = count / kSumLanes * kSumLanes;
    const float32x4_t lowest = vdupq_n_f32(-std::numeric_limits<float>::infinity());
    float32x4_t maxima[2] = {lowest, lowest};
    for (int64_t c = 0; c < whole; c += kSumLanes) {
      for (int h = 0; h < 2; ++h) maxima[h] = vmaxnmq_f32(vld1q_f32(scores + c + 4 * h), maxima[h]);
    }
    float lanes[kSumLanes];
    vst1q_f32(lanes, maxima[0]);
    vst1q_f32(lanes + 4, maxima[1]);
    const float max_score =
        greatest(scores, whole, count, greatest(lanes, 0, kSumLanes, -std::numeric_limits<float>::infinity()));
    const float32x4_t subtrahend = vdupq_n_f32(max_score);
    float32x4_t sums[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t c = 0; c < whole; c += kSumLanes) {
      for (int h = 0; h < 2; ++h) {
        const float32x4_t e = softmax_exp_neon(vsubq_f32(vld1q_f32(scores + c + 4 * h), subtrahend));
        vst1q_f32(scores + c + 4 * h, e);
        sums[h] = vaddq_f32(sums[h], e);
      }
    }
    vst1q_f32(lanes, sums[0]);
    vst1q_f32(lanes + 4, sums[1]);
    exp_into_lanes(scores, whole, count, max_score, lanes);
    return add_lanes(lanes);
  }

  // packed[d * width + i] = key (tile + i)'s element d, for keys [tile, end):
  // 4 x 4 blocks transposed in registers, the edges one by one.
  static void pack_keys(const float* keys, int64_t kv_stride, int64_t tile, int64_t end, int64_t dim, int64_t width,
                        float* packed) {
    const int64_t whole_dims = dim / 4 * 4;
    int64_t c = tile;
    for (; c + 4 <= end; c += 4) {
      const float* k = keys + c * kv_stride;
      float* column = packed + (c - tile);
      for (int64_t d = 0; d < whole_dims; d += 4) {
        const float32x4_t r0 = vld1q_f32(k + d), r1 = vld1q_f32(k + kv_stride + d);
        const float32x4_t r2 = vld1q_f32(k + 2 * kv_stride + d), r3 = vld1q_f32(k + 3 * kv_stride + d);
        // t0 = [r0[0] r1[0] r0[2] r1[2]], t1 = [r0[1] r1[1] r0[3] r1[3]], t2, t3 likewise for r2, r3.
        const float64x2_t t0 = vreinterpretq_f64_f32(vtrn1q_f32(r0, r1));
        const float64x2_t t1 = vreinterpretq_f64_f32(vtrn2q_f32(r0, r1));
        const float64x2_t t2 = vreinterpretq_f64_f32(vtrn1q_f32(r2, r3));
        const float64x2_t t3 = vreinterpretq_f64_f32(vtrn2q_f32(r2, r3));
        float* at = column + d * width;
        vst1q_f32(at, vreinterpretq_f32_f64(vzip1q_f64(t0, t2)));
        vst1q_f32(at + width, vreinterpretq_f32_f64(vzip1q_f64(t1, t3)));
        vst1q_f32(at + 2 * width, vreinterpretq_f32_f64(vzip2q_f64(t0, t2)));
        vst1q_f32(at + 3 * width, vreinterpretq_f32_f64(vzip2q_f64(t1, t3)));
      }
      for (int i = 0; i < 4; ++i) {
        for (int64_t d = whole_dims; d < dim; ++d) column[d * width + i] = k[i * kv_stride + d];
      }
    }
    for (; c < end; ++c) {
      const float* k = keys + c * kv_stride;
      float* column = packed + (c - tile);
      for (int64_t d = 0; d < dim; ++d) column[d * width] = k[d];
    }
  }

  static void score_keys(const float* q, const float* keys, int64_t kv_stride, const float* packed, int64_t width,
                         int64_t tile, int64_t begin, int64_t end, int64_t dim, float scale, const float* mask_row,
                         float* scores) {
    int64_t c = begin;
    for (; c + 16 <= end; c += 16) {
      const float* column = packed + (c - tile);
      float32x4_t a[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
      for (int64_t d = 0; d < dim; ++d) {
        const float* row = column + d * width;
        for (int j = 0; j < 4; ++j) a[j] = vaddq_f32(a[j], vmulq_n_f32(vld1q_f32(row + 4 * j), q[d]));
      }
      for (int j = 0; j < 4; ++j) store_scores_neon(a[j], scale, mask_row, c + 4 * j, scores);
    }
    for (; c + 4 <= end; c += 4) {
      const float* column = packed + (c - tile);
      float32x4_t a = vdupq_n_f32(0.0f);
      for (int64_t d = 0; d < dim; ++d) a = vaddq_f32(a, vmulq_n_f32(vld1q_f32(column + d * width), q[d]));
      store_scores_neon(a, scale, mask_row, c, scores);
    }
    PortableOps::score_keys(q, keys, kv_stride, nullptr, 0, 0, c, end, dim, scale, mask_row, scores);
  }

  // acc[d] += p[c] * v[c][d] for c in order; up to eight vectors of head_dim
  // at a time in registers, the last elements (head_dim % 4) one by one.
  static void accumulate_values(const float* probabilities, const float* values, int64_t kv_stride, int64_t begin,
                                int64_t end, int64_t dim, float* acc) {
    const int64_t vectors = dim / 4;
    for (int64_t first = 0; first < vectors; first += 8) {
      const int64_t count = std::min<int64_t>(8, vectors - first);
      float32x4_t sums[8];
      for (int64_t j = 0; j < count; ++j) sums[j] = vld1q_f32(acc + (first + j) * 4);
      if (count == 8) {
        for (int64_t c = begin; c < end; ++c) {
          const float weight = probabilities[c];
          const float* v = values + c * kv_stride + first * 4;
          for (int j = 0; j < 8; ++j) sums[j] = vaddq_f32(sums[j], vmulq_n_f32(vld1q_f32(v + j * 4), weight));
        }
      } else {
        for (int64_t c = begin; c < end; ++c) {
          const float weight = probabilities[c];
          const float* v = values + c * kv_stride + first * 4;
          for (int64_t j = 0; j < count; ++j) sums[j] = vaddq_f32(sums[j], vmulq_n_f32(vld1q_f32(v + j * 4), weight));
        }
      }
      for (int64_t j = 0; j < count; ++j) vst1q_f32(acc + (first + j) * 4, sums[j]);
    }
    for (int64_t c = begin; c < end; ++c) {
      const float weight = probabilities[c];
      const float* v = values + c * kv_stride;
      for (int64_t d = vectors * 4; d < dim; ++d) acc[d] += weight * v[d];
    }
  }
};

#endif  // ETNA_ATTENTION_NEON

// -1: no forced path.
std::atomic<int> forced_path{-1};

bool cpu_runs(AttentionPath path) {
  switch (path) {
    case AttentionPath::kPortable: return true;
#ifdef ETNA_ATTENTION_X86
    case AttentionPath::kAvx2: return cpu_features().avx2;
#else
    case AttentionPath::kAvx2: return false;
#endif
#ifdef ETNA_ATTENTION_NEON
    case AttentionPath::kNeon: return cpu_features().asimd;
#else
    case AttentionPath::kNeon: return false;
#endif
  }
  return false;
}

AttentionPath best_path() {
  for (AttentionPath path : {AttentionPath::kAvx2, AttentionPath::kNeon}) {
    if (cpu_runs(path)) return path;
  }
  return AttentionPath::kPortable;
}

AttentionPath active_path() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<AttentionPath>(forced);
  return best_path();
}

// How one call cuts its work: units of up to kRowBlock query rows of one
// (batch, head), in that order, and each unit's scratch.
struct Plan {
  int64_t rows = 0;          // rows per unit
  int64_t row_blocks = 0;    // units per (batch, head)
  int64_t key_tile = 0;      // keys per tile (a multiple of 8)
  int64_t padded_dim = 0;    // head_dim rounded up to 8
  int64_t packed_width = 0;  // keys per row of a packed tile (key_tile)
  size_t unit_floats = 0;    // scratch floats of one unit

  explicit Plan(const AttentionProblem& p) {
    rows = std::min(kRowBlock, p.sequence);
    row_blocks = (p.sequence + rows - 1) / rows;
    key_tile = std::max<int64_t>(
        8, kKeyTileBytes / static_cast<int64_t>(sizeof(float)) / std::max<int64_t>(p.head_dim, 1) / 8 * 8);
    padded_dim = (p.head_dim + 7) / 8 * 8;
    packed_width = key_tile;
    unit_floats = static_cast<size_t>(rows * (p.visible + padded_dim + 1) + key_tile * p.head_dim);
  }
};

// Rows [first, end) of head h of batch b.
template <typename Ops>
void attend_rows(const AttentionProblem& p, const Plan& plan, int64_t b, int64_t h, int64_t first, int64_t end,
                 float* scratch) {
  const int64_t dim = p.head_dim;
  const int64_t kv_stride = p.kv_heads * dim;
  const int64_t kv_head = h / (p.heads / p.kv_heads);
  const float* keys = p.keys + (b * p.capacity * p.kv_heads + kv_head) * dim;
  const float* values = p.values + (b * p.capacity * p.kv_heads + kv_head) * dim;
  const int64_t rows = end - first;
  float* scores = scratch;                     // rows x visible
  float* acc = scores + rows * p.visible;      // rows x padded_dim
  float* sums = acc + rows * plan.padded_dim;  // rows
  float* packed = sums + rows;                 // head_dim x key_tile: one tile of keys, transposed
  auto q_row = [&](int64_t r) { return p.query + ((b * p.sequence + r) * p.heads + h) * dim; };
  auto mask_row = [&](int64_t r) { return p.mask ? p.mask + r * p.mask_row_stride : nullptr; };
  const int64_t last_seen = keys_seen(p, end - 1);

  for (int64_t tile = 0; tile < last_seen; tile += plan.key_tile) {
    if constexpr (Ops::kPacksKeys) {
      Ops::pack_keys(keys, kv_stride, tile, std::min(tile + plan.key_tile, last_seen), dim, plan.packed_width, packed);
    }
    for (int64_t r = first; r < end; ++r) {
      const int64_t stop = std::min(tile + plan.key_tile, keys_seen(p, r));
      if (stop <= tile) continue;
      Ops::score_keys(q_row(r), keys, kv_stride, packed, plan.packed_width, tile, tile, stop, dim, p.scale, mask_row(r),
                      scores + (r - first) * p.visible);
    }
  }
  for (int64_t r = first; r < end; ++r) {
    sums[r - first] = Ops::softmax(scores + (r - first) * p.visible, keys_seen(p, r));
    std::fill(acc + (r - first) * plan.padded_dim, acc + (r - first + 1) * plan.padded_dim, 0.0f);
  }
  for (int64_t tile = 0; tile < last_seen; tile += plan.key_tile) {
    for (int64_t r = first; r < end; ++r) {
      const int64_t stop = std::min(tile + plan.key_tile, keys_seen(p, r));
      if (stop <= tile) continue;
      Ops::accumulate_values(scores + (r - first) * p.visible, values, kv_stride, tile, stop, dim,
                             acc + (r - first) * plan.padded_dim);
    }
  }
  for (int64_t r = first; r < end; ++r) {
    const float inverse = 1.0f / sums[r - first];
    const float* a = acc + (r - first) * plan.padded_dim;
    float* o = p.out + ((b * p.sequence + r) * p.heads + h) * dim;
    for (int64_t d = 0; d < dim; ++d) o[d] = a[d] * inverse;
  }
}

template <typename Ops>
Status attend_on(const AttentionProblem& p, pthreadpool_t pool) {
  const Plan plan(p);
  const size_t units = static_cast<size_t>(p.batch * p.heads * plan.row_blocks);
  // Keys read by every row together: the work of a multiply-add each for the
  // scores and the weighted sum, and about as much again for the exp.
  int64_t keys_read = p.sequence * p.visible;
  if (p.causal) keys_read = p.sequence * p.start_pos + p.sequence * (p.sequence + 1) / 2;
  const size_t work = static_cast<size_t>(p.batch * p.heads * keys_read) * static_cast<size_t>(2 * p.head_dim + 16);
  const size_t tasks = std::min(units, task_count(pool, work, kMinTaskFloatMacs));
  std::unique_ptr<float[]> scratch(new (std::nothrow) float[tasks * plan.unit_floats]);
  if (!scratch) {
    return make_error(ErrorCode::kInternal, "out of memory for attention scratch (" +
                                                std::to_string(tasks * plan.unit_floats * sizeof(float)) + " bytes)");
  }
  parallel_for(pool_for(pool, tasks), tasks, [&](size_t task) {
    float* mine = scratch.get() + task * plan.unit_floats;
    // Tasks take consecutive units, as evenly as they divide.
    const size_t stop = (task + 1) * units / tasks;
    for (size_t unit = task * units / tasks; unit < stop; ++unit) {
      const int64_t block = static_cast<int64_t>(unit) % plan.row_blocks;
      const int64_t head_index = static_cast<int64_t>(unit) / plan.row_blocks;
      const int64_t first = block * plan.rows;
      attend_rows<Ops>(p, plan, head_index / p.heads, head_index % p.heads, first,
                       std::min(first + plan.rows, p.sequence), mine);
    }
  });
  return Status::ok();
}

}  // namespace

float softmax_exp(float y) {
  if (!(y >= kExpFloor)) return std::isnan(y) ? y : 0.0f;
  const float n = std::nearbyint(y * kLog2e);
  const float r = (y - n * kLn2High) - n * kLn2Low;
  float p = kExpTaylor[0];
  for (size_t i = 1; i < sizeof kExpTaylor / sizeof kExpTaylor[0]; ++i) p = p * r + kExpTaylor[i];
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return p * two_to_n;
}

Status attend(const AttentionProblem& p, pthreadpool_t pool) {
  if (p.batch == 0 || p.sequence == 0 || p.heads == 0 || p.head_dim == 0) return Status::ok();
#ifdef ETNA_ATTENTION_X86
  if (active_path() == AttentionPath::kAvx2) return attend_on<Avx2Ops>(p, pool);
#endif
#ifdef ETNA_ATTENTION_NEON
  if (active_path() == AttentionPath::kNeon) return attend_on<NeonOps>(p, pool);
#endif
  return attend_on<PortableOps>(p, pool);
}

float softmax_in_place(float* scores, int64_t count) {
#ifdef ETNA_ATTENTION_X86
  if (active_path() == AttentionPath::kAvx2) return Avx2Ops::softmax(scores, count);
#endif
#ifdef ETNA_ATTENTION_NEON
  if (active_path() == AttentionPath::kNeon) return NeonOps::softmax(scores, count);
#endif
  return PortableOps::softmax(scores, count);
}

AttentionPath active_attention_path() { return active_path(); }

const char* attention_path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::kPortable: return "portable";
    case AttentionPath::kAvx2: return "avx2";
    case AttentionPath::kNeon: return "neon";
  }
  return "unknown";
}

std::vector<AttentionPath> available_attention_paths() {
  std::vector<AttentionPath> paths;
  for (AttentionPath path : {AttentionPath::kPortable, AttentionPath::kAvx2, AttentionPath::kNeon}) {
    if (cpu_runs(path)) paths.push_back(path);
  }
  return paths;
}

void force_attention_path(AttentionPath path) { forced_path.store(static_cast<int>(path), std::memory_order_relaxed); }

void clear_forced_attention_path() { forced_path.store(-1, std::memory_order_relaxed); }

}  // namespace etna::kernels
