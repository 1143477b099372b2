// The arithmetic of llama:: attention (llm_ops.cpp checks the arguments):
// softmax(q k^T * scale [+ mask]) v over a KV cache, tiled, vectorized where
// the CPU allows (AVX2 or NEON, chosen at run time; portable code otherwise)
// and split over the call's thread pool by (batch, head, block of query rows).
//
// Every output row is computed by one thread with one order of operations,
// whatever the number of threads or the blocks the rows fall in, so results
// do not depend on the thread count; and every path uses the same order (the
// vector ones run their lanes over keys, or over head_dim, never along a sum),
// so they give the same bits as each other and as the scalar kernel before
// them.
#pragma once

#include <pthreadpool.h>

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace etna::kernels {

// Row-major [batch, positions, heads, head_dim] buffers, as ExecuTorch lays
// out projections and caches.
struct AttentionProblem {
  const float* query = nullptr;   // [batch, sequence, heads, head_dim]
  const float* keys = nullptr;    // [batch, capacity, kv_heads, head_dim]
  const float* values = nullptr;  // as keys
  const float* mask = nullptr;    // [sequence, *] rows mask_row_stride apart, added after scaling; null: none
  float* out = nullptr;           // as query
  int64_t batch = 0, sequence = 0, heads = 0, kv_heads = 0, head_dim = 0, capacity = 0;
  int64_t start_pos = 0;
  int64_t mask_row_stride = 0;
  // Keys of every row: 0 .. visible; with `causal`, row r sees only 0 ..= start_pos + r.
  int64_t visible = 0;
  bool causal = false;
  float scale = 1.0f;
};

// Computes p.out. Fails only when scratch memory cannot be had.
Status attend(const AttentionProblem& p, pthreadpool_t pool);

// scores[0 .. count) = e^(score - max) in place (softmax_exp each), returning
// their sum, on the active path (all give the same bits). A NaN score is
// skipped by the max and makes the sum NaN.
float softmax_in_place(float* scores, int64_t count);

// e^y as the softmax takes it, for y = score - max <= 0 on every path: within
// 2 ulp of e^y down to -87, 0 below (and for -inf), NaN for NaN.
float softmax_exp(float y);

enum class AttentionPath : uint8_t { kPortable, kAvx2, kNeon };

const char* attention_path_name(AttentionPath path);
// The path calls take now: the forced one, else the best this CPU runs.
AttentionPath active_attention_path();
// The paths this CPU runs, the portable one first.
std::vector<AttentionPath> available_attention_paths();
// Tests and benchmarks only: run later calls on `path` (must be available);
// clear_forced_attention_path() goes back to the best one.
void force_attention_path(AttentionPath path);
void clear_forced_attention_path();

}  // namespace etna::kernels
