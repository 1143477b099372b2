#include "kernels/quantized_attention.h"

#include <algorithm>
#include <memory>
#include <new>
#include <string>

#include "core/parallel.h"
#include "kernels/attention.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ETNA_QUANTIZED_ATTENTION_X86 1
#include <immintrin.h>
#define ETNA_AVX2 __attribute__((target("avx2")))
#elif defined(__aarch64__)
#define ETNA_QUANTIZED_ATTENTION_NEON 1
#include <arm_neon.h>
#endif

namespace etna::kernels {
namespace {

// The keys (or values) of one (batch, kv head): position c's row, scale and
// zero point.
struct KvRows {
  const int8_t* data;
  int64_t stride;
  const float* scales;
  int64_t scale_stride;
  const int8_t* zero_points;
  int64_t zero_point_stride;

  const int8_t* row(int64_t c) const { return data + c * stride; }
  float scale(int64_t c) const { return scales[c * scale_stride]; }
  int32_t zero_point(int64_t c) const { return zero_points[c * zero_point_stride]; }
};

KvRows kv_rows(const QuantizedRows& t, int64_t b, int64_t head) {
  return {t.data + b * t.batch_stride + head * t.head_stride,
          t.position_stride,
          t.scales + b * t.scale_batch_stride + head * t.scale_head_stride,
          t.scale_position_stride,
          t.zero_points + b * t.zero_point_batch_stride + head * t.zero_point_head_stride,
          t.zero_point_position_stride};
}

// One query row, shifted by its zero point: q - zq in int16, their sum, and
// sq * scale (the factor every score of the row takes).
struct ShiftedQuery {
  const int16_t* values;
  int32_t sum;
  float factor;
};

// (q - zq) . (k - zk) = q' . k - zk * sum(q'), exact in int32; then the
// scales, in one order on every path.
inline float score_of(int32_t dot_with_key, const ShiftedQuery& q, const KvRows& keys, int64_t c,
                      const float* mask_row) {
  const int32_t dot = dot_with_key - keys.zero_point(c) * q.sum;
  float score = static_cast<float>(dot) * keys.scale(c) * q.factor;
  if (mask_row != nullptr) score += mask_row[c];
  return score;
}

struct PortableOps {
  static void score_keys(const ShiftedQuery& q, const KvRows& keys, int64_t count, int64_t dim, const float* mask_row,
                         float* scores) {
    for (int64_t c = 0; c < count; ++c) {
      const int8_t* k = keys.row(c);
      int32_t dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += static_cast<int32_t>(q.values[d]) * k[d];
      scores[c] = score_of(dot, q, keys, c, mask_row);
    }
  }

  // acc[d] += p[c] * sv[c] * (v[c][d] - zv[c]) for c in order.
  static void accumulate_values(const float* probabilities, const KvRows& values, int64_t count, int64_t dim,
                                float* acc) {
    accumulate_dims(probabilities, values, count, 0, dim, acc);
  }

  // acc[d] for d in [from, to): the vector paths finish the dims past their last whole vector here.
  static void accumulate_dims(const float* probabilities, const KvRows& values, int64_t count, int64_t from, int64_t to,
                              float* acc) {
    for (int64_t c = 0; c < count; ++c) {
      const float weight = probabilities[c] * values.scale(c);
      const int32_t zero_point = values.zero_point(c);
      const int8_t* v = values.row(c);
      for (int64_t d = from; d < to; ++d) acc[d] += weight * static_cast<float>(v[d] - zero_point);
    }
  }
};

#ifdef ETNA_QUANTIZED_ATTENTION_X86

// PortableOps eight keys (dot products) or 64 elements of head_dim (values)
// at a time: the integer sums are exact in any order, and each float of acc
// gets the same multiply and add, key after key, as there (no FMA).
struct Avx2Ops {
  // The int32 sums of q' * k over head_dim's first `whole` (a multiple of 16) elements.
  ETNA_AVX2 static __m256i partial_dots(const int16_t* q, const int8_t* k, int64_t whole) {
    __m256i sums = _mm256_setzero_si256();
    for (int64_t d = 0; d < whole; d += 16) {
      const __m256i wide_k = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + d)));
      const __m256i wide_q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + d));
      sums = _mm256_add_epi32(sums, _mm256_madd_epi16(wide_q, wide_k));
    }
    return sums;
  }

  static int32_t tail_dot(const int16_t* q, const int8_t* k, int64_t from, int64_t dim) {
    int32_t dot = 0;
    for (int64_t d = from; d < dim; ++d) dot += static_cast<int32_t>(q[d]) * k[d];
    return dot;
  }

  ETNA_AVX2 static void score_keys(const ShiftedQuery& q, const KvRows& keys, int64_t count, int64_t dim,
                                   const float* mask_row, float* scores) {
    const int64_t whole = dim / 16 * 16;
    int64_t c = 0;
    for (; c + 8 <= count; c += 8) {
      __m256i s[8];
      for (int i = 0; i < 8; ++i) s[i] = partial_dots(q.values, keys.row(c + i), whole);
      // Lane i of the result is the sum of s[i]'s lanes.
      const __m256i pairs01 = _mm256_hadd_epi32(s[0], s[1]), pairs23 = _mm256_hadd_epi32(s[2], s[3]);
      const __m256i pairs45 = _mm256_hadd_epi32(s[4], s[5]), pairs67 = _mm256_hadd_epi32(s[6], s[7]);
      const __m256i quads0123 = _mm256_hadd_epi32(pairs01, pairs23), quads4567 = _mm256_hadd_epi32(pairs45, pairs67);
      const __m256i dots8 = _mm256_add_epi32(_mm256_permute2x128_si256(quads0123, quads4567, 0x20),
                                             _mm256_permute2x128_si256(quads0123, quads4567, 0x31));
      alignas(32) int32_t dots[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(dots), dots8);
      for (int i = 0; i < 8; ++i) {
        const int32_t dot = dots[i] + tail_dot(q.values, keys.row(c + i), whole, dim);
        scores[c + i] = score_of(dot, q, keys, c + i, mask_row);
      }
    }
    for (; c < count; ++c) {
      const __m256i sums = partial_dots(q.values, keys.row(c), whole);
      __m128i half = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
      half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0x4E));
      half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0xB1));
      const int32_t dot = _mm_cvtsi128_si32(half) + tail_dot(q.values, keys.row(c), whole, dim);
      scores[c] = score_of(dot, q, keys, c, mask_row);
    }
  }

  // acc[first, first + 8 n) for n = kVectors, or `vectors` when kVectors is 0:
  // those sums stay in registers while every key adds to them (a fixed n lets
  // the compiler keep them there).
  template <int kVectors>
  ETNA_AVX2 static void accumulate_block(const float* probabilities, const KvRows& values, int64_t count, int64_t first,
                                         int64_t vectors, float* acc) {
    const int64_t n = kVectors > 0 ? kVectors : vectors;
    __m256 sums[8];
    for (int64_t j = 0; j < n; ++j) sums[j] = _mm256_loadu_ps(acc + first + j * 8);
    for (int64_t c = 0; c < count; ++c) {
      const __m256 weight = _mm256_set1_ps(probabilities[c] * values.scale(c));
      const __m256i zero_point = _mm256_set1_epi32(values.zero_point(c));
      const int8_t* v = values.row(c) + first;
      for (int64_t j = 0; j < n; ++j) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(v + j * 8));
        const __m256i shifted = _mm256_sub_epi32(_mm256_cvtepi8_epi32(bytes), zero_point);
        sums[j] = _mm256_add_ps(sums[j], _mm256_mul_ps(weight, _mm256_cvtepi32_ps(shifted)));
      }
    }
    for (int64_t j = 0; j < n; ++j) _mm256_storeu_ps(acc + first + j * 8, sums[j]);
  }

  ETNA_AVX2 static void accumulate_values(const float* probabilities, const KvRows& values, int64_t count, int64_t dim,
                                          float* acc) {
    const int64_t whole = dim / 8 * 8;
    for (int64_t first = 0; first < whole; first += 64) {
      const int64_t vectors = std::min<int64_t>(8, (whole - first) / 8);
      if (vectors == 8) {
        accumulate_block<8>(probabilities, values, count, first, vectors, acc);
      } else {
        accumulate_block<0>(probabilities, values, count, first, vectors, acc);
      }
    }
    PortableOps::accumulate_dims(probabilities, values, count, whole, dim, acc);
  }
};

#endif  // ETNA_QUANTIZED_ATTENTION_X86

#ifdef ETNA_QUANTIZED_ATTENTION_NEON

// PortableOps on NEON (arm64): the int32 dot products eight elements at a
// time (exact in any order), and 32 elements of head_dim of the values at a
// time, each float of acc getting the same multiply and add, key after key.
struct NeonOps {
  static void score_keys(const ShiftedQuery& q, const KvRows& keys, int64_t count, int64_t dim, const float* mask_row,
                         float* scores) {
    const int64_t whole = dim / 8 * 8;
    for (int64_t c = 0; c < count; ++c) {
      const int8_t* k = keys.row(c);
      int32x4_t sums[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int64_t d = 0; d < whole; d += 8) {
        const int16x8_t wide_k = vmovl_s8(vld1_s8(k + d));
        const int16x8_t wide_q = vld1q_s16(q.values + d);
        sums[0] = vmlal_s16(sums[0], vget_low_s16(wide_q), vget_low_s16(wide_k));
        sums[1] = vmlal_high_s16(sums[1], wide_q, wide_k);
      }
      int32_t dot = vaddvq_s32(vaddq_s32(sums[0], sums[1]));
      for (int64_t d = whole; d < dim; ++d) dot += static_cast<int32_t>(q.values[d]) * k[d];
      scores[c] = score_of(dot, q, keys, c, mask_row);
    }
  }

  // acc[first, first + 4 n) for n = kVectors, or `vectors` when kVectors is 0.
  template <int kVectors>
  static void accumulate_block(const float* probabilities, const KvRows& values, int64_t count, int64_t first,
                               int64_t vectors, float* acc) {
    const int64_t n = kVectors > 0 ? kVectors : vectors;
    float32x4_t sums[8];
    for (int64_t j = 0; j < n; ++j) sums[j] = vld1q_f32(acc + first + j * 4);
    for (int64_t c = 0; c < count; ++c) {
      const float weight = probabilities[c] * values.scale(c);
      const int32x4_t zero_point = vdupq_n_s32(values.zero_point(c));
      const int8_t* v = values.row(c) + first;
      for (int64_t j = 0; j < n; j += 2) {
        const int16x8_t wide = vmovl_s8(vld1_s8(v + j * 4));
        const int32x4_t shifted[2] = {vsubq_s32(vmovl_s16(vget_low_s16(wide)), zero_point),
                                      vsubq_s32(vmovl_high_s16(wide), zero_point)};
        for (int64_t h = 0; h < 2; ++h) {
          sums[j + h] = vaddq_f32(sums[j + h], vmulq_n_f32(vcvtq_f32_s32(shifted[h]), weight));
        }
      }
    }
    for (int64_t j = 0; j < n; ++j) vst1q_f32(acc + first + j * 4, sums[j]);
  }

  static void accumulate_values(const float* probabilities, const KvRows& values, int64_t count, int64_t dim,
                                float* acc) {
    const int64_t whole = dim / 8 * 8;
    for (int64_t first = 0; first < whole; first += 32) {
      const int64_t vectors = std::min<int64_t>(8, (whole - first) / 4);
      if (vectors == 8) {
        accumulate_block<8>(probabilities, values, count, first, vectors, acc);
      } else {
        accumulate_block<0>(probabilities, values, count, first, vectors, acc);
      }
    }
    PortableOps::accumulate_dims(probabilities, values, count, whole, dim, acc);
  }
};

#endif  // ETNA_QUANTIZED_ATTENTION_NEON

int64_t keys_seen(const QuantizedAttentionProblem& p, int64_t row) {
  return p.causal ? p.start_pos + row + 1 : p.visible;
}

// Scratch of one task: the shifted query row, scores of every visible key,
// the output accumulators.
struct Scratch {
  int16_t* query;
  float* scores;
  float* acc;
};

template <typename Ops>
void attend_row(const QuantizedAttentionProblem& p, int64_t b, int64_t h, int64_t r, const Scratch& scratch) {
  const int64_t dim = p.head_dim;
  const QuantizedRows& Q = p.query;
  const int8_t* q = Q.data + b * Q.batch_stride + r * Q.position_stride + h * Q.head_stride;
  const float q_scale = Q.scales[b * Q.scale_batch_stride + r * Q.scale_position_stride + h * Q.scale_head_stride];
  const int32_t q_zero_point =
      Q.zero_points[b * Q.zero_point_batch_stride + r * Q.zero_point_position_stride + h * Q.zero_point_head_stride];
  int32_t sum = 0;
  for (int64_t d = 0; d < dim; ++d) {
    scratch.query[d] = static_cast<int16_t>(q[d] - q_zero_point);
    sum += scratch.query[d];
  }
  const ShiftedQuery shifted{scratch.query, sum, q_scale * p.scale};
  const int64_t kv_head = h / (p.heads / p.kv_heads);
  const int64_t seen = keys_seen(p, r);
  const float* mask_row = p.mask ? p.mask + r * p.mask_row_stride : nullptr;
  Ops::score_keys(shifted, kv_rows(p.keys, b, kv_head), seen, dim, mask_row, scratch.scores);
  const float total = softmax_in_place(scratch.scores, seen);
  std::fill(scratch.acc, scratch.acc + dim, 0.0f);
  Ops::accumulate_values(scratch.scores, kv_rows(p.values, b, kv_head), seen, dim, scratch.acc);
  const float inverse = 1.0f / total;
  float* o = p.out + b * p.out_batch_stride + r * p.out_position_stride + h * p.out_head_stride;
  for (int64_t d = 0; d < dim; ++d) o[d] = scratch.acc[d] * inverse;
}

template <typename Ops>
Status attend_on(const QuantizedAttentionProblem& p, pthreadpool_t pool) {
  // Units are (batch, head, row), in that order.
  const size_t units = static_cast<size_t>(p.batch * p.heads * p.sequence);
  int64_t keys_read = p.sequence * p.visible;
  if (p.causal) keys_read = p.sequence * p.start_pos + p.sequence * (p.sequence + 1) / 2;
  const size_t work = static_cast<size_t>(p.batch * p.heads * keys_read) * static_cast<size_t>(2 * p.head_dim + 16);
  const size_t tasks = std::min(units, task_count(pool, work, kMinTaskFloatMacs));
  const int64_t widest = p.causal ? p.start_pos + p.sequence : p.visible;
  const size_t task_floats = static_cast<size_t>(widest + p.head_dim);  // scores, accumulators
  std::unique_ptr<float[]> floats(new (std::nothrow) float[tasks * task_floats]);
  std::unique_ptr<int16_t[]> queries(new (std::nothrow) int16_t[tasks * static_cast<size_t>(p.head_dim)]);
  if (!floats || !queries) {
    return make_error(ErrorCode::kInternal, "out of memory for attention scratch (" +
                                                std::to_string(tasks * (task_floats * sizeof(float) + p.head_dim * 2)) +
                                                " bytes)");
  }
  parallel_for(pool_for(pool, tasks), tasks, [&](size_t task) {
    float* mine = floats.get() + task * task_floats;
    const Scratch scratch{queries.get() + task * static_cast<size_t>(p.head_dim), mine, mine + widest};
    const size_t stop = (task + 1) * units / tasks;
    for (size_t unit = task * units / tasks; unit < stop; ++unit) {
      const int64_t row = static_cast<int64_t>(unit) % p.sequence;
      const int64_t head_index = static_cast<int64_t>(unit) / p.sequence;
      attend_row<Ops>(p, head_index / p.heads, head_index % p.heads, row, scratch);
    }
  });
  return Status::ok();
}

}  // namespace

Status attend_quantized(const QuantizedAttentionProblem& p, pthreadpool_t pool) {
  if (p.batch == 0 || p.sequence == 0 || p.heads == 0 || p.head_dim == 0) return Status::ok();
#ifdef ETNA_QUANTIZED_ATTENTION_X86
  if (active_attention_path() == AttentionPath::kAvx2) return attend_on<Avx2Ops>(p, pool);
#endif
#ifdef ETNA_QUANTIZED_ATTENTION_NEON
  if (active_attention_path() == AttentionPath::kNeon) return attend_on<NeonOps>(p, pool);
#endif
  return attend_on<PortableOps>(p, pool);
}

}  // namespace etna::kernels
