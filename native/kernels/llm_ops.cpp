// ExecuTorch's LLM custom operators (namespace llama): attention over a KV
// cache and cache updates, as export_llama and optimum-executorch emit them.
//
// Layouts are ExecuTorch's: q/k/v projections and caches are
// [batch, sequence, heads, head_dim], row-major. `start_pos` is the position
// of the first query row; query row r sits at start_pos + r and, with causal
// masking, sees cache positions 0 ..= start_pos + r. Without a mask the keys
// are cache positions 0 .. start_pos + sequence; with one (ExecuTorch >= 0.7)
// they are every position of the cache and the mask is [sequence, capacity],
// so the mask alone decides what a row sees. Query heads are grouped
// onto key/value heads (grouped-query attention): head h reads kv head
// h / (query_heads / kv_heads). custom_quantized_sdpa reads int8 queries and
// caches, each row with its own scale and zero point (quantized_attention.h),
// as --quantize_kv_cache writes them.
//
// Every index and size is checked before any byte of a cache is written, so
// a refused call leaves the cache as it was.

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/quantized_attention.h"
#include "kernels/real_elements.h"
#include "kernels/scalar.h"

namespace etna::kernels {
namespace {

// A [batch, sequence, heads, head_dim] tensor's sizes.
struct SequenceLayout {
  int64_t batch = 0;
  int64_t sequence = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;

  int64_t offset(int64_t b, int64_t s, int64_t h) const { return ((b * sequence + s) * heads + h) * head_dim; }
};

Result<SequenceLayout> sequence_layout(const OpArgs& op, const Tensor& t, std::string_view name) {
  if (t.rank() != 4) {
    return op.input_error(std::string(name) + " must be 4-D [batch, sequence, heads, head_dim], got " + t.describe());
  }
  return SequenceLayout{t.size(0), t.size(1), t.size(2), t.size(3)};
}

// value [B, S, H, D] fits cache [B, Smax, H, D] (same dtype, batch, heads and
// head_dim).
Status check_cache_pair(const OpArgs& op, const Tensor& value, std::string_view value_name, const Tensor& cache,
                        std::string_view cache_name) {
  ETNA_KERNEL_ASSIGN(SequenceLayout v, sequence_layout(op, value, value_name));
  ETNA_KERNEL_ASSIGN(SequenceLayout c, sequence_layout(op, cache, cache_name));
  if (value.dtype() != cache.dtype()) {
    return op.program_error(std::string(value_name) + " " + value.describe() + " and " + std::string(cache_name) + " " +
                            cache.describe() + " must have one dtype");
  }
  if (v.batch != c.batch || v.heads != c.heads || v.head_dim != c.head_dim) {
    return op.input_error(std::string(value_name) + " " + value.describe() + " does not fit " +
                          std::string(cache_name) + " " + cache.describe() + " (batch, heads and head_dim must match)");
  }
  return Status::ok();
}

// Rows start_pos .. start_pos + sequence of a cache of `capacity` rows exist.
Status check_cache_window(const OpArgs& op, int64_t start_pos, int64_t sequence, int64_t capacity, const Tensor& cache,
                          std::string_view cache_name, int capacity_dim = 1) {
  if (start_pos < 0 || sequence > capacity || start_pos > capacity - sequence) {
    return op.input_error("start_pos " + std::to_string(start_pos) + " + sequence length " + std::to_string(sequence) +
                          " exceeds " + std::string(cache_name) + " " + cache.describe() + " (dim " +
                          std::to_string(capacity_dim) + " is the capacity)");
  }
  return Status::ok();
}

Status check_cache_window(const OpArgs& op, int64_t start_pos, int64_t sequence, const Tensor& cache,
                          std::string_view cache_name) {
  return check_cache_window(op, start_pos, sequence, cache.size(1), cache, cache_name);
}

// Copies value's rows into the cache at start_pos (ExecuTorch's update_cache).
void write_cache(const Tensor& value, Tensor& cache, int64_t start_pos) {
  const size_t row_bytes = static_cast<size_t>(value.size(2) * value.size(3)) * value.element_size();
  const size_t block_bytes = row_bytes * static_cast<size_t>(value.size(1));
  const auto* src = static_cast<const uint8_t*>(value.data());
  auto* dst = static_cast<uint8_t*>(cache.data());
  for (int64_t b = 0; b < value.size(0); ++b) {
    std::memcpy(dst + (static_cast<size_t>(b * cache.size(1) + start_pos)) * row_bytes,
                src + static_cast<size_t>(b) * block_bytes, block_bytes);
  }
}

struct AttentionArgs {
  const Tensor* query = nullptr;
  const Tensor* key_cache = nullptr;
  const Tensor* value_cache = nullptr;
  int64_t start_pos = 0;
  const Tensor* mask = nullptr;  // float32 [sequence, cache capacity], added after scaling
  bool is_causal = false;
  std::optional<double> scale;
  Tensor* out = nullptr;
};

// A float32 attn_mask is [sequence, capacity] and excludes is_causal.
Status check_mask(const OpArgs& op, const AttentionArgs& a, int64_t sequence, int64_t capacity) {
  if (a.mask == nullptr) return Status::ok();
  if (a.is_causal) return op.input_error("attn_mask and is_causal cannot both be set");
  ETNA_TRY(op.expect_dtype(*a.mask, "attn_mask", ScalarType::kFloat));
  if (a.mask->rank() != 2 || a.mask->size(0) != sequence || a.mask->size(1) != capacity) {
    return op.input_error("attn_mask " + a.mask->describe() + " must be [" + std::to_string(sequence) + ", " +
                          std::to_string(capacity) + "] (query rows by cache positions)");
  }
  return Status::ok();
}

Status check_attention(const OpArgs& op, const AttentionArgs& a) {
  ETNA_KERNEL_ASSIGN(SequenceLayout q, sequence_layout(op, *a.query, "query"));
  ETNA_KERNEL_ASSIGN(SequenceLayout k, sequence_layout(op, *a.key_cache, "key"));
  ETNA_KERNEL_ASSIGN(SequenceLayout v, sequence_layout(op, *a.value_cache, "value"));
  ETNA_TRY(op.expect_dtype(*a.query, "query", ScalarType::kFloat));
  ETNA_TRY(op.expect_dtype(*a.key_cache, "key", ScalarType::kFloat));
  ETNA_TRY(op.expect_dtype(*a.value_cache, "value", ScalarType::kFloat));
  ETNA_TRY(op.expect_dtype(*a.out, "out", ScalarType::kFloat));
  if (k.batch != q.batch || v.batch != q.batch || k.head_dim != q.head_dim || v.head_dim != q.head_dim ||
      k.heads != v.heads || k.sequence != v.sequence) {
    return op.input_error("query " + a.query->describe() + ", key " + a.key_cache->describe() + " and value " +
                          a.value_cache->describe() + " disagree in batch, heads, capacity or head_dim");
  }
  if (k.heads == 0 || q.heads % k.heads != 0) {
    return op.input_error("query heads (" + std::to_string(q.heads) + ") must be a multiple of key/value heads (" +
                          std::to_string(k.heads) + ")");
  }
  ETNA_TRY(check_cache_window(op, a.start_pos, q.sequence, *a.key_cache, "key"));
  return check_mask(op, a, q.sequence, k.sequence);
}

Result<std::optional<double>> optional_double(const OpArgs& op, size_t index, std::string_view name) {
  ETNA_KERNEL_ASSIGN(std::optional<Scalar> value, op.optional_scalar_arg(index, name));
  if (!value) return std::optional<double>();
  if (value->is_bool()) return op.program_error(OpArgs::arg_label(index, name) + " must be a float, got a bool");
  return std::optional<double>(value->to<double>());
}

// Reads attn_mask, dropout_p, is_causal and scale from `first` on.
Status read_attention_options(const OpArgs& op, size_t first, AttentionArgs& a) {
  ETNA_KERNEL_ASSIGN(Tensor * mask, op.optional_input(first, "attn_mask"));
  ETNA_KERNEL_ASSIGN(double dropout_p, op.double_arg(first + 1, "dropout_p"));
  ETNA_KERNEL_ASSIGN(bool is_causal, op.bool_arg(first + 2, "is_causal"));
  ETNA_KERNEL_ASSIGN(std::optional<double> scale, optional_double(op, first + 3, "scale"));
  (void)dropout_p;  // inference: no dropout, as in ExecuTorch
  a.mask = (mask != nullptr && mask->numel() > 0) ? mask : nullptr;
  a.is_causal = is_causal;
  a.scale = scale;
  return Status::ok();
}

// The options, then out.
Status read_attention_tail(const OpArgs& op, size_t first, AttentionArgs& a) {
  ETNA_TRY(read_attention_options(op, first, a));
  ETNA_KERNEL_ASSIGN(a.out, op.output(first + 4, "out"));
  return Status::ok();
}

Status run_attention(const OpArgs& op, AttentionArgs& a) {
  ETNA_TRY(op.prepare_output(*a.out, Shape::of(*a.query)));
  AttentionProblem p;
  p.query = a.query->data_as<const float>();
  p.keys = a.key_cache->data_as<const float>();
  p.values = a.value_cache->data_as<const float>();
  p.mask = a.mask ? a.mask->data_as<const float>() : nullptr;
  p.out = a.out->data_as<float>();
  p.batch = a.query->size(0);
  p.sequence = a.query->size(1);
  p.heads = a.query->size(2);
  p.head_dim = a.query->size(3);
  p.kv_heads = a.key_cache->size(2);
  p.capacity = a.key_cache->size(1);
  p.start_pos = a.start_pos;
  // Rows of the mask are its row stride apart (the kernel takes row-major tensors only).
  p.mask_row_stride = a.mask ? a.mask->stride(0) : 0;
  p.visible = a.mask ? p.capacity : a.start_pos + p.sequence;
  p.causal = a.is_causal;
  p.scale = static_cast<float>(a.scale ? *a.scale : 1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  Status status = attend(p, op.pool());
  if (!status) return make_error(status.error().code, std::string(op.name()) + ": " + status.error().message);
  return Status::ok();
}

// llama::custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask=None,
//   float drpout_p=0.0, bool is_causal=False, float? scale=None, *, Tensor(a!) out) -> Tensor(a!)
Status custom_sdpa_out(KernelArgs args) {
  OpArgs op(args);
  AttentionArgs a;
  ETNA_KERNEL_ASSIGN(a.query, op.input(0, "query"));
  ETNA_KERNEL_ASSIGN(a.key_cache, op.input(1, "key"));
  ETNA_KERNEL_ASSIGN(a.value_cache, op.input(2, "value"));
  ETNA_KERNEL_ASSIGN(a.start_pos, op.int_arg(3, "start_pos"));
  ETNA_TRY(read_attention_tail(op, 4, a));
  ETNA_TRY(check_attention(op, a));
  return run_attention(op, a);
}

// One int8 operand of custom_quantized_sdpa with its zero points and scales.
struct QuantizedOperand {
  const Tensor* data = nullptr;
  const Tensor* zero_points = nullptr;
  const Tensor* scales = nullptr;
  std::string_view name;
};

// int8 data of rank 4, int8 zero points and float32 scales of rank 4 that
// agree with it in the first three dims (one of each per row of the last).
Status check_quantized_operand(const OpArgs& op, const QuantizedOperand& t) {
  const std::string name(t.name);
  if (t.zero_points == nullptr || t.scales == nullptr) {
    return op.input_error("an int8 query needs " + name + "'s zero points and scales, and one is None");
  }
  ETNA_TRY(op.expect_dtype(*t.data, name, ScalarType::kChar));
  ETNA_TRY(op.expect_dtype(*t.zero_points, name + " zero_points", ScalarType::kChar));
  ETNA_TRY(op.expect_dtype(*t.scales, name + " scales", ScalarType::kFloat));
  if (t.data->rank() != 4) return op.input_error(name + " must be 4-D, got " + t.data->describe());
  for (const Tensor* parameters : {t.zero_points, t.scales}) {
    bool fits = parameters->rank() == 4;
    for (size_t d = 0; fits && d < 3; ++d) fits = parameters->size(d) == t.data->size(d);
    if (!fits) {
      return op.input_error(name + " " + t.data->describe() + ": its zero points " + t.zero_points->describe() +
                            " and scales " + t.scales->describe() + " must match it in every dim but the last");
    }
  }
  return Status::ok();
}

// Rows of `t` by (batch, position, head); the position is dim 1, or dim 2
// with is_seq_at_dim_2 ([batch, heads, positions, head_dim]). Element 0 of
// the parameters' last dim is each row's.
QuantizedRows quantized_rows(const QuantizedOperand& t, bool seq_at_dim_2) {
  const size_t position = seq_at_dim_2 ? 2 : 1;
  const size_t head = seq_at_dim_2 ? 1 : 2;
  QuantizedRows rows;
  rows.data = t.data->data_as<const int8_t>();
  rows.batch_stride = t.data->stride(0);
  rows.position_stride = t.data->stride(position);
  rows.head_stride = t.data->stride(head);
  rows.scales = t.scales->data_as<const float>();
  rows.scale_batch_stride = t.scales->stride(0);
  rows.scale_position_stride = t.scales->stride(position);
  rows.scale_head_stride = t.scales->stride(head);
  rows.zero_points = t.zero_points->data_as<const int8_t>();
  rows.zero_point_batch_stride = t.zero_points->stride(0);
  rows.zero_point_position_stride = t.zero_points->stride(position);
  rows.zero_point_head_stride = t.zero_points->stride(head);
  return rows;
}

// llama::custom_quantized_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos,
//   Tensor? attn_mask=None, float drpout_p=0.0, bool is_causal=False, float? scale=None,
//   Tensor? q_zero_points=None, Tensor? q_scales=None, Tensor? k_zero_points=None, Tensor? k_scales=None,
//   Tensor? v_zero_points=None, Tensor? v_scales=None, bool is_seq_at_dim_2=False, *, Tensor(a!) out)
//   -> Tensor(a!)
// What --quantize_kv_cache writes: int8 query and caches with a float32 scale
// and an int8 zero point per (batch, position, head) row; a float32 out. A
// float32 query (no parameters) attends as custom_sdpa.
Status custom_quantized_sdpa_out(KernelArgs args) {
  OpArgs op(args);
  AttentionArgs a;
  QuantizedOperand q{nullptr, nullptr, nullptr, "query"};
  QuantizedOperand k{nullptr, nullptr, nullptr, "key"};
  QuantizedOperand v{nullptr, nullptr, nullptr, "value"};
  ETNA_KERNEL_ASSIGN(q.data, op.input(0, "query"));
  ETNA_KERNEL_ASSIGN(k.data, op.input(1, "key"));
  ETNA_KERNEL_ASSIGN(v.data, op.input(2, "value"));
  ETNA_KERNEL_ASSIGN(a.start_pos, op.int_arg(3, "start_pos"));
  ETNA_TRY(read_attention_options(op, 4, a));
  ETNA_KERNEL_ASSIGN(q.zero_points, op.optional_input(8, "q_zero_points"));
  ETNA_KERNEL_ASSIGN(q.scales, op.optional_input(9, "q_scales"));
  ETNA_KERNEL_ASSIGN(k.zero_points, op.optional_input(10, "k_zero_points"));
  ETNA_KERNEL_ASSIGN(k.scales, op.optional_input(11, "k_scales"));
  ETNA_KERNEL_ASSIGN(v.zero_points, op.optional_input(12, "v_zero_points"));
  ETNA_KERNEL_ASSIGN(v.scales, op.optional_input(13, "v_scales"));
  ETNA_KERNEL_ASSIGN(bool seq_at_dim_2, op.bool_arg(14, "is_seq_at_dim_2"));
  ETNA_KERNEL_ASSIGN(a.out, op.output(15, "out"));
  a.query = q.data;
  a.key_cache = k.data;
  a.value_cache = v.data;
  if (q.data->dtype() == ScalarType::kFloat) {
    if (seq_at_dim_2) return op.unsupported("is_seq_at_dim_2 with a float32 query (write the query int8)");
    ETNA_TRY(check_attention(op, a));
    return run_attention(op, a);
  }
  if (q.data->dtype() != ScalarType::kChar) {
    return op.program_error("query must be int8 (or float32), got " + q.data->describe());
  }
  for (const QuantizedOperand* operand : {&q, &k, &v}) ETNA_TRY(check_quantized_operand(op, *operand));
  ETNA_TRY(op.expect_dtype(*a.out, "out", ScalarType::kFloat));
  const size_t position = seq_at_dim_2 ? 2 : 1;
  const size_t head = seq_at_dim_2 ? 1 : 2;
  const Tensor& query = *q.data;
  const Tensor& key = *k.data;
  const Tensor& value = *v.data;
  if (key.size(0) != query.size(0) || value.size(0) != query.size(0) || key.size(3) != query.size(3) ||
      value.size(3) != query.size(3) || key.size(position) != value.size(position) ||
      key.size(head) != value.size(head)) {
    return op.input_error("query " + query.describe() + ", key " + key.describe() + " and value " + value.describe() +
                          " disagree in batch, heads, capacity or head_dim");
  }
  if (key.size(head) == 0 || query.size(head) % key.size(head) != 0) {
    return op.input_error("query heads (" + std::to_string(query.size(head)) +
                          ") must be a multiple of key/value heads (" + std::to_string(key.size(head)) + ")");
  }
  if (query.size(3) > kMaxQuantizedHeadDim) {
    return op.unsupported("head_dim " + std::to_string(query.size(3)) + " (at most " +
                          std::to_string(kMaxQuantizedHeadDim) + " keeps the int32 dot products exact)");
  }
  const int64_t sequence = query.size(position);
  const int64_t capacity = key.size(position);
  ETNA_TRY(check_cache_window(op, a.start_pos, sequence, capacity, key, "key", static_cast<int>(position)));
  ETNA_TRY(check_mask(op, a, sequence, capacity));
  ETNA_TRY(op.prepare_output(*a.out, Shape::of(query)));
  QuantizedAttentionProblem p;
  p.query = quantized_rows(q, seq_at_dim_2);
  p.keys = quantized_rows(k, seq_at_dim_2);
  p.values = quantized_rows(v, seq_at_dim_2);
  p.mask = a.mask ? a.mask->data_as<const float>() : nullptr;
  p.mask_row_stride = a.mask ? a.mask->stride(0) : 0;
  p.out = a.out->data_as<float>();
  p.out_batch_stride = a.out->stride(0);
  p.out_position_stride = a.out->stride(position);
  p.out_head_stride = a.out->stride(head);
  p.batch = query.size(0);
  p.sequence = sequence;
  p.heads = query.size(head);
  p.kv_heads = key.size(head);
  p.head_dim = query.size(3);
  p.start_pos = a.start_pos;
  p.visible = a.mask ? capacity : a.start_pos + sequence;
  p.causal = a.is_causal;
  p.scale = static_cast<float>(a.scale ? *a.scale : 1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  Status status = attend_quantized(p, op.pool());
  if (!status) return make_error(status.error().code, std::string(op.name()) + ": " + status.error().message);
  return Status::ok();
}

// llama::sdpa_with_kv_cache.out(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache,
//   Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, float drpout_p=0.0,
//   bool is_causal=False, float? scale=None, *, Tensor(c!) out) -> Tensor(c!)
Status sdpa_with_kv_cache_out(KernelArgs args) {
  OpArgs op(args);
  AttentionArgs a;
  ETNA_KERNEL_ASSIGN(a.query, op.input(0, "query"));
  ETNA_KERNEL_ASSIGN(Tensor * key, op.input(1, "key"));
  ETNA_KERNEL_ASSIGN(Tensor * value, op.input(2, "value"));
  ETNA_KERNEL_ASSIGN(Tensor * key_cache, op.input(3, "key_cache"));
  ETNA_KERNEL_ASSIGN(Tensor * value_cache, op.input(4, "value_cache"));
  ETNA_KERNEL_ASSIGN(a.start_pos, op.int_arg(5, "start_pos"));
  ETNA_KERNEL_ASSIGN(int64_t seq_len, op.int_arg(6, "seq_len"));
  ETNA_TRY(read_attention_tail(op, 7, a));
  a.key_cache = key_cache;
  a.value_cache = value_cache;
  ETNA_TRY(check_cache_pair(op, *key, "key", *key_cache, "key_cache"));
  ETNA_TRY(check_cache_pair(op, *value, "value", *value_cache, "value_cache"));
  if (key->size(1) != seq_len || value->size(1) != seq_len || a.query->rank() != 4 || a.query->size(1) != seq_len) {
    return op.input_error("seq_len " + std::to_string(seq_len) + " must be dim 1 of query " + a.query->describe() +
                          ", key " + key->describe() + " and value " + value->describe());
  }
  ETNA_TRY(check_cache_window(op, a.start_pos, seq_len, *key_cache, "key_cache"));
  ETNA_TRY(check_cache_window(op, a.start_pos, seq_len, *value_cache, "value_cache"));
  ETNA_TRY(check_attention(op, a));
  write_cache(*key, *key_cache, a.start_pos);
  write_cache(*value, *value_cache, a.start_pos);
  return run_attention(op, a);
}

// The arguments the cache updates lead with: value, cache and start_pos.
struct CacheUpdate {
  Tensor* value = nullptr;
  Tensor* cache = nullptr;
  int64_t start_pos = 0;
};

Result<CacheUpdate> read_cache_update(const OpArgs& op) {
  CacheUpdate update;
  ETNA_KERNEL_ASSIGN(update.value, op.input(0, "value"));
  ETNA_KERNEL_ASSIGN(update.cache, op.input(1, "cache"));
  ETNA_KERNEL_ASSIGN(update.start_pos, op.int_arg(2, "start_pos"));
  return update;
}

// llama::update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out) -> Tensor(b!)
// `out` is a placeholder ExecuTorch never writes.
Status update_cache_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(CacheUpdate update, read_cache_update(op));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.tensor(3, "out"));
  (void)out;
  ETNA_TRY(check_cache_pair(op, *update.value, "value", *update.cache, "cache"));
  ETNA_TRY(check_cache_window(op, update.start_pos, update.value->size(1), *update.cache, "cache"));
  write_cache(*update.value, *update.cache, update.start_pos);
  return Status::ok();
}

// llama::update_cache_with_indices.out(Tensor value, Tensor(a!) cache, SymInt start_pos, Tensor indices, *,
//   Tensor(b!) out) -> Tensor(b!)
// Row s of batch b goes to cache position indices[b, s]; start_pos is unused.
Status update_cache_with_indices_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(CacheUpdate update, read_cache_update(op));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.input(3, "indices"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.tensor(4, "out"));
  (void)out;
  Tensor& value = *update.value;
  Tensor& cache = *update.cache;
  ETNA_TRY(check_cache_pair(op, value, "value", cache, "cache"));
  ETNA_TRY(op.expect_dtype(*indices, "indices", ScalarType::kLong));
  if (indices->rank() != 2 || indices->size(0) != value.size(0) || indices->size(1) != value.size(1)) {
    return op.input_error("indices " + indices->describe() + " must be [batch, seq_len] of value " + value.describe());
  }
  const int64_t* positions = indices->data_as<const int64_t>();
  const int64_t capacity = cache.size(1);
  for (size_t i = 0; i < indices->numel(); ++i) {
    if (positions[i] < 0 || positions[i] >= capacity) {
      return op.input_error("indices holds position " + std::to_string(positions[i]) + ", outside cache " +
                            cache.describe() + " (dim 1 is the capacity)");
    }
  }
  const size_t row_bytes = static_cast<size_t>(value.size(2) * value.size(3)) * value.element_size();
  const auto* src = static_cast<const uint8_t*>(value.data());
  auto* dst = static_cast<uint8_t*>(cache.data());
  for (int64_t b = 0; b < value.size(0); ++b) {
    for (int64_t s = 0; s < value.size(1); ++s) {
      const int64_t position = positions[b * value.size(1) + s];
      std::memcpy(dst + static_cast<size_t>(b * capacity + position) * row_bytes,
                  src + static_cast<size_t>(b * value.size(1) + s) * row_bytes, row_bytes);
    }
  }
  return Status::ok();
}

}  // namespace

void register_llm_kernels(KernelRegistry& registry) {
  registry.add({"llama::custom_sdpa.out", 10, custom_sdpa_out});
  registry.add({"llama::custom_quantized_sdpa.out", 17, custom_quantized_sdpa_out});
  registry.add({"llama::sdpa_with_kv_cache.out", 13, sdpa_with_kv_cache_out});
  registry.add({"llama::update_cache.out", 5, update_cache_out});
  registry.add({"llama::update_cache_with_indices.out", 6, update_cache_with_indices_out});
}

}  // namespace etna::kernels
