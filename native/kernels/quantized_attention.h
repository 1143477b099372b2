// The arithmetic of llama::custom_quantized_sdpa (llm_ops.cpp checks the
// arguments): attention over int8 queries, keys and values, each
// [batch, position, head] row of head_dim with its own float32 scale and int8
// zero point, as ExecuTorch's quantized KV cache stores them.
//
// score = (q - zq) . (k - zk) * sq * sk * scale [+ mask]: the dot product of
// the zero-point-shifted integers is exact (int32); out = sum over keys of
// softmax(score) * sv * (v - zv), in float. Causal rows, visible keys and the
// mask follow AttentionProblem (attention.h); query head h reads kv head
// h / (heads / kv_heads).
//
// Every output row is computed by one thread with one order of operations,
// and the AVX2 path only vectorizes loops whose element order stays as
// written (integers, and float ops lane by lane), so results depend neither
// on the thread count nor on the path.
#pragma once

#include <pthreadpool.h>

#include <cstdint>

#include "core/status.h"

namespace etna::kernels {

// An int8 tensor with one (scale, zero point) per row of head_dim. Strides
// are in elements; head_dim is contiguous.
struct QuantizedRows {
  const int8_t* data = nullptr;
  int64_t batch_stride = 0, position_stride = 0, head_stride = 0;
  const float* scales = nullptr;
  int64_t scale_batch_stride = 0, scale_position_stride = 0, scale_head_stride = 0;
  const int8_t* zero_points = nullptr;
  int64_t zero_point_batch_stride = 0, zero_point_position_stride = 0, zero_point_head_stride = 0;
};

struct QuantizedAttentionProblem {
  QuantizedRows query;          // [batch, sequence, heads, head_dim] (positions and heads through the strides)
  QuantizedRows keys;           // [batch, capacity, kv_heads, head_dim]
  QuantizedRows values;         // as keys
  const float* mask = nullptr;  // [sequence, *] rows mask_row_stride apart, added after scaling; null: none
  int64_t mask_row_stride = 0;
  float* out = nullptr;  // float32, laid out as the query
  int64_t out_batch_stride = 0, out_position_stride = 0, out_head_stride = 0;
  int64_t batch = 0, sequence = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t start_pos = 0;
  // Keys of every row: 0 .. visible; with `causal`, row r sees only 0 ..= start_pos + r.
  int64_t visible = 0;
  bool causal = false;
  float scale = 1.0f;
};

// head_dim at most this keeps every int32 dot product exact.
constexpr int64_t kMaxQuantizedHeadDim = 32768;

// Computes p.out. Fails only when scratch memory cannot be had.
Status attend_quantized(const QuantizedAttentionProblem& p, pthreadpool_t pool);

}  // namespace etna::kernels
