// llama::custom_quantized_sdpa against attention over the dequantized
// values in double: softmax(sum (sq (q - zq)) (sk (k - zk)) * scale + mask)
// times sv (v - zv). Every vector path and thread count gives the same bits;
// bad arguments are refused with typed errors. The cache writes that feed it
// (int8 rows, float32 scales, int8 zero points through llama::update_cache)
// keep every byte.

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "attention_test_support.h"
#include "core/thread_pool.h"
#include "kernel_test_support.h"
#include "kernels/attention.h"

namespace etna::kernel_test {
namespace {

using kernels::AttentionPath;

struct QuantizedCase {
  int64_t batch, sequence, heads, kv_heads, head_dim, capacity, start_pos;
  bool causal;
  bool masked;
  bool seq_at_dim_2;  // [batch, heads, positions, head_dim]
  double scale;       // 0: the default 1 / sqrt(head_dim)
};

void PrintTo(const QuantizedCase& c, std::ostream* os) {
  *os << "batch " << c.batch << ", sequence " << c.sequence << ", heads " << c.heads << "/" << c.kv_heads
      << ", head_dim " << c.head_dim << ", capacity " << c.capacity << ", start_pos " << c.start_pos
      << (c.causal ? ", causal" : "") << (c.masked ? ", masked" : "") << (c.seq_at_dim_2 ? ", seq at dim 2" : "")
      << (c.scale != 0 ? ", explicit scale" : "");
}

// Element (b, position, head, d) of a tensor of `positions` x `heads` rows of
// `width`, in the case's layout.
size_t element(const QuantizedCase& c, int64_t b, int64_t position, int64_t head, int64_t d, int64_t positions,
               int64_t heads, int64_t width) {
  const int64_t row =
      c.seq_at_dim_2 ? (b * heads + head) * positions + position : (b * positions + position) * heads + head;
  return static_cast<size_t>(row * width + d);
}

std::vector<int64_t> sizes(const QuantizedCase& c, int64_t positions, int64_t heads, int64_t width) {
  return c.seq_at_dim_2 ? std::vector<int64_t>{c.batch, heads, positions, width}
                        : std::vector<int64_t>{c.batch, positions, heads, width};
}

// One int8 operand: rows, and a scale and zero point per row (stored as the
// rows are, with a last dim of 1).
struct Operand {
  std::vector<int8_t> data;
  std::vector<float> scales;
  std::vector<int8_t> zero_points;
};

Operand random_operand(Lcg& rng, const QuantizedCase& c, int64_t positions, int64_t heads, float max_scale) {
  Operand o;
  const size_t rows = static_cast<size_t>(c.batch * positions * heads);
  for (size_t i = 0; i < rows * static_cast<size_t>(c.head_dim); ++i)
    o.data.push_back(static_cast<int8_t>(rng.integer(-128, 128)));
  for (size_t i = 0; i < rows; ++i) {
    o.scales.push_back(rng.uniform(max_scale / 8, max_scale));
    o.zero_points.push_back(static_cast<int8_t>(rng.integer(-128, 128)));
  }
  return o;
}

struct QuantizedInputs {
  QuantizedCase c;
  Operand q, k, v;
  std::vector<float> mask;  // [sequence, capacity]; empty: none

  double effective_scale() const { return c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim)); }
};

QuantizedInputs random_inputs(const QuantizedCase& c, uint64_t seed) {
  Lcg rng(seed);
  QuantizedInputs in{c, {}, {}, {}, {}};
  in.q = random_operand(rng, c, c.sequence, c.heads, 0.02f);
  in.k = random_operand(rng, c, c.capacity, c.kv_heads, 0.02f);
  in.v = random_operand(rng, c, c.capacity, c.kv_heads, 0.03f);
  if (c.masked) {
    in.mask = rng.floats(static_cast<size_t>(c.sequence * c.capacity), -1.0f, 1.0f);
    for (size_t i = 0; i < in.mask.size(); ++i) {
      if (i % static_cast<size_t>(c.capacity) != 0 && rng.next() % 5 == 0)
        in.mask[i] = -std::numeric_limits<float>::infinity();
    }
  }
  return in;
}

// The attention in double over the dequantized values.
std::vector<float> reference(const QuantizedInputs& in) {
  const QuantizedCase& c = in.c;
  const int64_t D = c.head_dim;
  auto dequantized = [&](const Operand& o, int64_t b, int64_t position, int64_t head, int64_t d, int64_t positions,
                         int64_t heads) {
    const size_t row = element(c, b, position, head, 0, positions, heads, 1);
    return double(o.scales[row]) * (o.data[element(c, b, position, head, d, positions, heads, D)] - o.zero_points[row]);
  };
  std::vector<float> out(in.q.data.size());
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t kvh = h / (c.heads / c.kv_heads);
      for (int64_t r = 0; r < c.sequence; ++r) {
        const int64_t seen = c.causal ? c.start_pos + r + 1 : in.mask.empty() ? c.start_pos + c.sequence : c.capacity;
        std::vector<double> p(static_cast<size_t>(seen));
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < seen; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += dequantized(in.q, b, r, h, d, c.sequence, c.heads) *
                   dequantized(in.k, b, j, kvh, d, c.capacity, c.kv_heads);
          }
          p[static_cast<size_t>(j)] =
              dot * in.effective_scale() + (in.mask.empty() ? 0.0 : in.mask[static_cast<size_t>(r * c.capacity + j)]);
          top = std::max(top, p[static_cast<size_t>(j)]);
        }
        double total = 0;
        for (double& x : p) total += (x = std::exp(x - top));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < seen; ++j)
            acc += p[static_cast<size_t>(j)] / total * dequantized(in.v, b, j, kvh, d, c.capacity, c.kv_heads);
          out[element(c, b, r, h, d, c.sequence, c.heads, D)] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

// The tensors of one call, over a store.
struct QuantizedTensors {
  Tensor *q, *qz, *qs, *k, *kz, *ks, *v, *vz, *vs, *mask, *out;

  QuantizedTensors(TensorStore& store, const QuantizedInputs& in) {
    const QuantizedCase& c = in.c;
    q = &store.make<int8_t>(sizes(c, c.sequence, c.heads, c.head_dim), in.q.data);
    qz = &store.make<int8_t>(sizes(c, c.sequence, c.heads, 1), in.q.zero_points);
    qs = &store.make<float>(sizes(c, c.sequence, c.heads, 1), in.q.scales);
    k = &store.make<int8_t>(sizes(c, c.capacity, c.kv_heads, c.head_dim), in.k.data);
    kz = &store.make<int8_t>(sizes(c, c.capacity, c.kv_heads, 1), in.k.zero_points);
    ks = &store.make<float>(sizes(c, c.capacity, c.kv_heads, 1), in.k.scales);
    v = &store.make<int8_t>(sizes(c, c.capacity, c.kv_heads, c.head_dim), in.v.data);
    vz = &store.make<int8_t>(sizes(c, c.capacity, c.kv_heads, 1), in.v.zero_points);
    vs = &store.make<float>(sizes(c, c.capacity, c.kv_heads, 1), in.v.scales);
    mask = in.mask.empty() ? nullptr : &store.make<float>({c.sequence, c.capacity}, in.mask);
    // NaN to start with, so an element no task wrote shows.
    out = &store.make<float>(sizes(c, c.sequence, c.heads, c.head_dim),
                             std::vector<float>(in.q.data.size(), std::numeric_limits<float>::quiet_NaN()));
  }

  // The arguments in schema order; null parameters are None.
  void fill(Args& args, const QuantizedCase& c) const {
    args.tensor(*q).tensor(*k).tensor(*v).integer(c.start_pos).optional_tensor(mask).real(0.0).boolean(c.causal);
    if (c.scale != 0) {
      args.real(c.scale);
    } else {
      args.none();
    }
    args.optional_tensor(qz).optional_tensor(qs).optional_tensor(kz).optional_tensor(ks).optional_tensor(vz);
    args.optional_tensor(vs).boolean(c.seq_at_dim_2).tensor(*out).same_as(15);
  }
};

Status run_quantized(QuantizedTensors& t, const QuantizedCase& c, pthreadpool_t pool = nullptr) {
  Args args;
  t.fill(args, c);
  return run_kernel("llama::custom_quantized_sdpa.out", args, pool);
}

std::vector<float> run_quantized(const QuantizedInputs& in, pthreadpool_t pool) {
  TensorStore store;
  QuantizedTensors t(store, in);
  EXPECT_TRUE(is_ok(run_quantized(t, in.c, pool)));
  return values_of<float>(*t.out);
}

class CustomQuantizedSdpa : public ::testing::TestWithParam<QuantizedCase> {};

// The reference within 1e-4 (outputs are up to about 4; the float32 work is
// a product of scales per score, the softmax and one sum per element), and
// on every path and thread count the portable path's bits.
TEST_P(CustomQuantizedSdpa, MatchesDequantizedReferenceOnEveryPathAndThreadCount) {
  const QuantizedInputs in = random_inputs(GetParam(), 29);
  const std::vector<float> expected = reference(in);
  std::vector<float> portable;
  for (AttentionPath path : kernels::available_attention_paths()) {
    const std::string name = kernels::attention_path_name(path);
    std::vector<float> alone;
    {
      const ForcedAttention forced(path, false);
      alone = run_quantized(in, nullptr);
    }
    expect_matches(alone, expected, 1e-4f, name + ", 1 thread");
    if (path == AttentionPath::kPortable) portable = alone;
    EXPECT_TRUE(same_bits(alone, portable)) << name << " differs from the portable path";
    for (size_t threads : {2, 3}) {
      const auto pool = ThreadPool::create(threads);
      ASSERT_TRUE(pool);
      const ForcedAttention forced(path, true);
      EXPECT_TRUE(same_bits(run_quantized(in, pool->get()), alone)) << name << ", " << threads << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CustomQuantizedSdpa,
    ::testing::Values(
        QuantizedCase{1, 1, 2, 2, 16, 16, 0, true, false, false, 0},     // first decode step
        QuantizedCase{1, 1, 4, 2, 64, 40, 37, true, false, false, 0},    // decode, grouped heads
        QuantizedCase{1, 5, 4, 1, 32, 16, 3, true, false, false, 0},     // chunk after 3 tokens, one kv head
        QuantizedCase{2, 4, 2, 2, 8, 8, 4, true, false, false, 0},       // batch 2, fills the cache
        QuantizedCase{1, 3, 2, 2, 20, 10, 2, false, false, false, 0.3},  // non-causal, explicit scale, odd head_dim
        QuantizedCase{1, 3, 4, 2, 16, 12, 2, false, true, false, 0},     // mask over the whole cache
        QuantizedCase{1, 6, 6, 3, 16, 12, 0, true, false, true, 0},      // [batch, heads, positions, head_dim]
        QuantizedCase{2, 2, 4, 4, 24, 9, 5, false, true, true, 0.125}));

// The extremes of int8: (q - zq) and (k - zk) reach -255 and 255, and head_dim
// 128 makes each dot product 128 * 255^2 (exact in int32).
TEST(CustomQuantizedSdpa, ExtremeValuesStayExact) {
  const QuantizedCase c{1, 2, 2, 1, 128, 4, 2, true, false, false, 0};
  QuantizedInputs in = random_inputs(c, 3);
  for (size_t i = 0; i < in.q.data.size(); ++i) in.q.data[i] = i % 3 == 0 ? 127 : -128;
  for (auto& z : in.q.zero_points) z = -128;
  for (size_t i = 0; i < in.k.data.size(); ++i) in.k.data[i] = i % 5 == 0 ? -128 : 127;
  for (auto& z : in.k.zero_points) z = 127;
  for (auto& s : in.q.scales) s = 1.0f / 1024;
  for (auto& s : in.k.scales) s = 1.0f / 1024;
  expect_matches(run_quantized(in, nullptr), reference(in), 1e-4f, "extremes");
}

// A float32 query (no parameters) attends as custom_sdpa, bit for bit.
TEST(CustomQuantizedSdpa, FloatQueryAttendsAsCustomSdpa) {
  Lcg rng(4);
  TensorStore store;
  Tensor& q = store.make<float>({1, 2, 4, 8}, rng.floats(64));
  Tensor& k = store.make<float>({1, 6, 2, 8}, rng.floats(96));
  Tensor& v = store.make<float>({1, 6, 2, 8}, rng.floats(96));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 4, 8});
  Tensor& want = store.make_empty(ScalarType::kFloat, {1, 2, 4, 8});
  Args plain;
  plain.tensor(q).tensor(k).tensor(v).integer(3).none().real(0.0).boolean(true).none().tensor(want).same_as(8);
  ASSERT_TRUE(is_ok(run_kernel("llama::custom_sdpa.out", plain)));
  Args quantized;
  quantized.tensor(q).tensor(k).tensor(v).integer(3).none().real(0.0).boolean(true).none();
  for (int i = 0; i < 6; ++i) quantized.none();
  quantized.boolean(false).tensor(out).same_as(15);
  ASSERT_TRUE(is_ok(run_kernel("llama::custom_quantized_sdpa.out", quantized)));
  EXPECT_TRUE(same_bits(values_of<float>(out), values_of<float>(want)));
  Args transposed;
  transposed.tensor(q).tensor(k).tensor(v).integer(3).none().real(0.0).boolean(true).none();
  for (int i = 0; i < 6; ++i) transposed.none();
  transposed.boolean(true).tensor(out).same_as(15);
  const Status status = run_kernel("llama::custom_quantized_sdpa.out", transposed);
  ASSERT_FALSE(status.is_ok());
  EXPECT_EQ(status.error().code, ErrorCode::kUnsupportedOperator);
}

TEST(CustomQuantizedSdpa, RefusesBadArgumentsWithTypedErrors) {
  const QuantizedCase c{1, 2, 4, 2, 8, 6, 1, true, false, false, 0};
  const QuantizedInputs in = random_inputs(c, 9);
  auto refused = [&](auto&& change, ErrorCode code, std::initializer_list<std::string_view> fragments) {
    TensorStore store;
    QuantizedTensors t(store, in);
    QuantizedCase call = c;
    change(store, t, call);
    const Status status = run_quantized(t, call);
    EXPECT_FALSE(status.is_ok());
    if (!status.is_ok()) {
      EXPECT_EQ(status.error().code, code) << status.error().message;
      EXPECT_TRUE(fails_with(status, fragments));
    }
    // The NaN-filled out, unless the case replaced it.
    if (t.out->dtype() == ScalarType::kFloat) {
      for (float x : values_of<float>(*t.out)) EXPECT_TRUE(std::isnan(x)) << "out was written";
    }
  };
  refused([](TensorStore&, QuantizedTensors& t, QuantizedCase&) { t.ks = nullptr; }, ErrorCode::kInvalidInput,
          {"key's zero points and scales"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.vz = &s.make_empty(ScalarType::kInt, {1, 6, 2, 1});
      },
      ErrorCode::kInvalidProgram, {"value zero_points"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.qs = &s.make_empty(ScalarType::kFloat, {1, 2, 1, 1});
      },
      ErrorCode::kInvalidInput, {"every dim but the last"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.q = &s.make_empty(ScalarType::kShort, {1, 2, 4, 8});
      },
      ErrorCode::kInvalidProgram, {"query must be int8"});
  refused([](TensorStore&, QuantizedTensors&, QuantizedCase& call) { call.start_pos = 5; }, ErrorCode::kInvalidInput,
          {"exceeds key", "dim 1 is the capacity"});
  refused([](TensorStore&, QuantizedTensors&, QuantizedCase& call) { call.start_pos = -1; }, ErrorCode::kInvalidInput,
          {"start_pos -1"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.mask = &s.make_empty(ScalarType::kFloat, {2, 6});
      },
      ErrorCode::kInvalidInput, {"cannot both be set"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase& call) {
        call.causal = false;
        t.mask = &s.make_empty(ScalarType::kFloat, {2, 5});
      },
      ErrorCode::kInvalidInput, {"attn_mask", "must be [2, 6]"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.k = &s.make_empty(ScalarType::kChar, {1, 6, 3, 8});
        t.kz = &s.make_empty(ScalarType::kChar, {1, 6, 3, 1});
        t.ks = &s.make_empty(ScalarType::kFloat, {1, 6, 3, 1});
      },
      ErrorCode::kInvalidInput, {"disagree"});
  refused(
      [](TensorStore& s, QuantizedTensors& t, QuantizedCase&) {
        t.out = &s.make_empty(ScalarType::kChar, {1, 2, 4, 8});
      },
      ErrorCode::kInvalidProgram, {"out"});
}

// What --quantize_kv_cache's update_cache calls write: int8 rows, and
// [.., 1] float32 scales and int8 zero points, each at start_pos, every byte
// as given and nothing else touched.
TEST(UpdateCache, WritesInt8RowsFloatScalesAndInt8ZeroPoints) {
  TensorStore store;
  Tensor& rows = store.make<int8_t>({1, 2, 2, 4}, {-128, -1, 0, 127, 5, 6, 7, 8, -9, 10, -11, 12, 13, -14, 15, -16});
  Tensor& cache = store.make<int8_t>({1, 5, 2, 4}, std::vector<int8_t>(40, 3));
  Tensor& scales = store.make<float>({1, 2, 2, 1}, {0.5f, 1e-30f, -0.0f, 3.25f});
  Tensor& scale_cache = store.make<float>({1, 5, 2, 1}, std::vector<float>(10, 1.0f));
  Tensor& zero_points = store.make<int8_t>({1, 2, 2, 1}, {-128, 127, 0, -1});
  Tensor& zero_point_cache = store.make<int8_t>({1, 5, 2, 1}, std::vector<int8_t>(10, 1));
  for (auto [value, target] :
       {std::pair<Tensor*, Tensor*>{&rows, &cache}, {&scales, &scale_cache}, {&zero_points, &zero_point_cache}}) {
    Tensor& placeholder = store.make_empty(value->dtype(), {1});
    Args args;
    args.tensor(*value).tensor(*target).integer(3).tensor(placeholder).same_as(3);
    ASSERT_TRUE(is_ok(run_kernel("llama::update_cache.out", args)));
  }
  std::vector<int8_t> want_cache(40, 3);
  const auto written = values_of<int8_t>(rows);
  std::copy(written.begin(), written.end(), want_cache.begin() + 24);
  EXPECT_EQ(values_of<int8_t>(cache), want_cache);
  const auto got_scales = values_of<float>(scale_cache);
  EXPECT_TRUE(same_bits(got_scales, {1, 1, 1, 1, 1, 1, 0.5f, 1e-30f, -0.0f, 3.25f}));
  EXPECT_EQ(values_of<int8_t>(zero_point_cache), (std::vector<int8_t>{1, 1, 1, 1, 1, 1, -128, 127, 0, -1}));
}

}  // namespace
}  // namespace etna::kernel_test
