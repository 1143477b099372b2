#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "core/parallel.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ETNA_ATTENTION_X86 1
#include <immintrin.h>
#define ETNA_AVX2_FMA __attribute__((target("avx2,fma")))
#endif

namespace etna::kernels {
namespace {

// Query rows of one head that one unit of work takes: they read each tile of
// keys and values while it is in cache.
constexpr int64_t kRowBlock = 16;
// Bytes of keys (or values) in one tile: a good part of L1, so a block of
// rows reads them from there.
constexpr int64_t kKeyTileBytes = 16 * 1024;

int64_t keys_seen(const AttentionProblem& p, int64_t row) { return p.causal ? p.start_pos + row + 1 : p.visible; }

// ---------------------------------------------------------------------------
// Portable path: plain loops in the order the original kernel used.

struct PortableOps {
  static void score_keys(const float* q, const float* keys, int64_t kv_stride, int64_t begin, int64_t end,
                         int64_t dim, float scale, const float* mask_row, float* scores) {
    for (int64_t c = begin; c < end; ++c) {
      const float* k = keys + c * kv_stride;
      float dot = 0;
      for (int64_t d = 0; d < dim; ++d) dot += q[d] * k[d];
      float score = dot * scale;
      if (mask_row != nullptr) score += mask_row[c];
      scores[c] = score;
    }
  }

  // exp(score - max) in place; returns their sum. A NaN score is skipped by
  // the max and makes the sum NaN; a row whose max is -inf or +inf gives
  // exp(NaN): NaN, as PyTorch's softmax does.
  static float softmax(float* scores, int64_t count) {
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < count; ++c) {
      if (scores[c] > max_score) max_score = scores[c];
    }
    float sum = 0;
    for (int64_t c = 0; c < count; ++c) {
      const float e = std::exp(scores[c] - max_score);
      scores[c] = e;
      sum += e;
    }
    return sum;
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
// AVX2 path. Dot products run along head_dim, eight lanes at a time (a
// masked load for the last partial vector), and each key's lanes are summed
// in one fixed order, whether the key comes in a group of eight or alone.

#ifdef ETNA_ATTENTION_X86

// Lanes below `count` (0..8) set.
ETNA_AVX2_FMA inline __m256i lane_mask(int64_t count) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), index);
}

// The four sums of lanes i and i + 4.
ETNA_AVX2_FMA inline __m128 fold(__m256 a) {
  return _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
}

// (f0 + f1) + (f2 + f3) of fold(a).
ETNA_AVX2_FMA inline float lane_sum(__m256 a) {
  __m128 u = fold(a);
  u = _mm_hadd_ps(u, u);
  u = _mm_hadd_ps(u, u);
  return _mm_cvtss_f32(u);
}

// lane_sum of four accumulators, in one register (same additions).
ETNA_AVX2_FMA inline __m128 lane_sums4(__m256 a, __m256 b, __m256 c, __m256 d) {
  return _mm_hadd_ps(_mm_hadd_ps(fold(a), fold(b)), _mm_hadd_ps(fold(c), fold(d)));
}

// exp(x) for x <= 0 (and NaN, which it keeps): 2^n * e^f with n the nearest
// integer to x / ln 2 and |f| <= ln 2 / 2, e^f by a degree-7 polynomial
// (Cephes' single-precision coefficients), within 2 ulp of exp. Below the
// smallest normal result it gives 0 (true values there are under 1.2e-38).
ETNA_AVX2_FMA inline __m256 exp_nonpositive(__m256 x) {
  const __m256 lowest = _mm256_set1_ps(-87.33654f);
  // max_ps returns its second operand when either is NaN: NaN stays.
  const __m256 clamped = _mm256_max_ps(lowest, x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(clamped, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // f = x - n ln 2, with ln 2 in two parts so that n * high is exact.
  __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), clamped);
  f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, f, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(f, f), _mm256_add_ps(f, _mm256_set1_ps(1.0f)));
  // n >= -126 after the clamp: 2^n is a normal float.
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  const __m256 result = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
  // Below the clamp (-inf included) the result is 0; NaN compares false and stays.
  return _mm256_andnot_ps(_mm256_cmp_ps(x, lowest, _CMP_LT_OQ), result);
}

struct Avx2Ops {
  ETNA_AVX2_FMA static void score_keys(const float* q, const float* keys, int64_t kv_stride, int64_t begin,
                                       int64_t end, int64_t dim, float scale, const float* mask_row,
                                       float* scores) {
    const int64_t whole = dim / 8 * 8;
    const bool partial = whole < dim;
    const __m256i tail = lane_mask(dim - whole);
    const __m256 scale8 = _mm256_set1_ps(scale);
    int64_t c = begin;
    for (; c + 8 <= end; c += 8) {
      const float* k = keys + c * kv_stride;
      __m256 acc[8];
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
      for (int64_t d = 0; d < whole; d += 8) {
        const __m256 qv = _mm256_loadu_ps(q + d);
        for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + i * kv_stride + d), acc[i]);
      }
      if (partial) {
        const __m256 qv = _mm256_maskload_ps(q + whole, tail);
        for (int i = 0; i < 8; ++i) {
          acc[i] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(k + i * kv_stride + whole, tail), acc[i]);
        }
      }
      const __m256 dots = _mm256_set_m128(lane_sums4(acc[4], acc[5], acc[6], acc[7]),
                                          lane_sums4(acc[0], acc[1], acc[2], acc[3]));
      const __m256 score = mask_row != nullptr ? _mm256_fmadd_ps(dots, scale8, _mm256_loadu_ps(mask_row + c))
                                               : _mm256_mul_ps(dots, scale8);
      _mm256_storeu_ps(scores + c, score);
    }
    for (; c < end; ++c) {
      const float* k = keys + c * kv_stride;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t d = 0; d < whole; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
      if (partial) acc = _mm256_fmadd_ps(_mm256_maskload_ps(q + whole, tail), _mm256_maskload_ps(k + whole, tail), acc);
      const __m128 dot = _mm_set_ss(lane_sum(acc));
      const __m128 score = mask_row != nullptr ? _mm_fmadd_ss(dot, _mm_set_ss(scale), _mm_set_ss(mask_row[c]))
                                               : _mm_mul_ss(dot, _mm_set_ss(scale));
      scores[c] = _mm_cvtss_f32(score);
    }
  }

  // As PortableOps::softmax (same NaN and infinity rules): max_ps(s, m)
  // returns m when s is NaN, so NaN scores are skipped by the max, and the
  // largest of the rest does not depend on the order it is taken in.
  ETNA_AVX2_FMA static float softmax(float* scores, int64_t count) {
    __m256 max8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    int64_t c = 0;
    for (; c + 8 <= count; c += 8) max8 = _mm256_max_ps(_mm256_loadu_ps(scores + c), max8);
    float max_score = -std::numeric_limits<float>::infinity();
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, max8);
    for (float lane : lanes) max_score = std::max(lane, max_score);
    for (; c < count; ++c) {
      if (scores[c] > max_score) max_score = scores[c];
    }
    const __m256 shift = _mm256_set1_ps(max_score);
    __m256 sum8 = _mm256_setzero_ps();
    c = 0;
    for (; c + 8 <= count; c += 8) {
      const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(scores + c), shift));
      _mm256_storeu_ps(scores + c, e);
      sum8 = _mm256_add_ps(sum8, e);
    }
    if (c < count) {
      const __m256i tail = lane_mask(count - c);
      // Lanes past the row read as 0 and become exp(0 - max): masked out of the store and the sum.
      const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_maskload_ps(scores + c, tail), shift));
      _mm256_maskstore_ps(scores + c, tail, e);
      sum8 = _mm256_add_ps(sum8, _mm256_and_ps(e, _mm256_castsi256_ps(tail)));
    }
    return lane_sum(sum8);
  }

  // acc[d] += p[c] * v[c][d] for c in order; up to eight vectors of head_dim
  // at a time, so that eight independent sums are in flight.
  ETNA_AVX2_FMA static void accumulate_values(const float* probabilities, const float* values, int64_t kv_stride,
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
          for (int j = 0; j < 8; ++j) sums[j] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(v + j * 8), sums[j]);
        }
      } else {
        const int64_t whole = has_tail ? count - 1 : count;
        for (int64_t c = begin; c < end; ++c) {
          const __m256 weight = _mm256_broadcast_ss(probabilities + c);
          const float* v = values + c * kv_stride + first * 8;
          for (int64_t j = 0; j < whole; ++j) sums[j] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(v + j * 8), sums[j]);
          if (has_tail) sums[whole] = _mm256_fmadd_ps(weight, _mm256_maskload_ps(v + whole * 8, tail), sums[whole]);
        }
      }
      for (int64_t j = 0; j < count; ++j) _mm256_storeu_ps(acc + (first + j) * 8, sums[j]);
    }
  }
};

bool cpu_has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

#else

bool cpu_has_avx2() { return false; }

#endif  // ETNA_ATTENTION_X86

// -1: no forced path.
std::atomic<int> forced_path{-1};

AttentionPath active_path() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<AttentionPath>(forced);
  return cpu_has_avx2() ? AttentionPath::kAvx2 : AttentionPath::kPortable;
}

// How one call cuts its work: units of up to kRowBlock query rows of one
// (batch, head), in that order, and each unit's scratch.
struct Plan {
  int64_t rows = 0;        // rows per unit
  int64_t row_blocks = 0;  // units per (batch, head)
  int64_t key_tile = 0;    // keys per tile (a multiple of 8)
  int64_t padded_dim = 0;  // head_dim rounded up to 8
  size_t unit_floats = 0;  // scratch floats of one unit

  explicit Plan(const AttentionProblem& p) {
    rows = std::min(kRowBlock, p.sequence);
    row_blocks = (p.sequence + rows - 1) / rows;
    key_tile = std::max<int64_t>(8, kKeyTileBytes / static_cast<int64_t>(sizeof(float)) /
                                        std::max<int64_t>(p.head_dim, 1) / 8 * 8);
    padded_dim = (p.head_dim + 7) / 8 * 8;
    unit_floats = static_cast<size_t>(rows * (p.visible + padded_dim + 1));
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
  float* scores = scratch;                         // rows x visible
  float* acc = scores + rows * p.visible;          // rows x padded_dim
  float* sums = acc + rows * plan.padded_dim;      // rows
  auto q_row = [&](int64_t r) { return p.query + ((b * p.sequence + r) * p.heads + h) * dim; };
  auto mask_row = [&](int64_t r) { return p.mask ? p.mask + r * p.mask_row_stride : nullptr; };
  const int64_t last_seen = keys_seen(p, end - 1);

  for (int64_t tile = 0; tile < last_seen; tile += plan.key_tile) {
    for (int64_t r = first; r < end; ++r) {
      const int64_t stop = std::min(tile + plan.key_tile, keys_seen(p, r));
      if (stop <= tile) continue;
      Ops::score_keys(q_row(r), keys, kv_stride, tile, stop, dim, p.scale, mask_row(r),
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

Status attend(const AttentionProblem& p, pthreadpool_t pool) {
  if (p.batch == 0 || p.sequence == 0 || p.heads == 0 || p.head_dim == 0) return Status::ok();
#ifdef ETNA_ATTENTION_X86
  if (active_path() == AttentionPath::kAvx2) return attend_on<Avx2Ops>(p, pool);
#endif
  return attend_on<PortableOps>(p, pool);
}

const char* attention_path_name(AttentionPath path) {
  switch (path) {
    case AttentionPath::kPortable: return "portable";
    case AttentionPath::kAvx2: return "avx2";
  }
  return "unknown";
}

std::vector<AttentionPath> available_attention_paths() {
  std::vector<AttentionPath> paths{AttentionPath::kPortable};
  if (cpu_has_avx2()) paths.push_back(AttentionPath::kAvx2);
  return paths;
}

void force_attention_path(AttentionPath path) {
  forced_path.store(static_cast<int>(path), std::memory_order_relaxed);
}

void clear_forced_attention_path() { forced_path.store(-1, std::memory_order_relaxed); }

}  // namespace etna::kernels
