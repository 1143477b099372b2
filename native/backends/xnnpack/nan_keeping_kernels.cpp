#include "backends/xnnpack/nan_keeping_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <vector>

#include "backends/xnnpack/output_bounds.h"
#include "core/cpu_features.h"

namespace etna::xnn {
namespace {

const float* input_floats(const EtnaKernelCall& call, size_t i) {
  return static_cast<const float*>(call.data[call.node.inputs[i]]);
}
float* output_floats(const EtnaKernelCall& call) { return static_cast<float*>(call.data[call.node.outputs[0]]); }
const Shape& output_shape(const EtnaKernelCall& call) { return call.shapes[call.node.outputs[0]]; }

// torch.maximum / torch.minimum: NaN when either side is NaN.
float maximum_keeping_nan(float x, float y) { return std::isnan(x) ? x : (std::isnan(y) ? y : (x > y ? x : y)); }
float minimum_keeping_nan(float x, float y) { return std::isnan(x) ? x : (std::isnan(y) ? y : (x < y ? x : y)); }

// Element strides of `shape` along the dims of `out` it broadcasts to
// (aligned at the innermost dim): 0 where it lacks the dim or has size 1.
void broadcast_strides(const Shape& shape, const Shape& out, size_t* strides) {
  const size_t missing = out.rank - shape.rank;
  size_t stride = 1;
  for (size_t d = out.rank; d-- > 0;) {
    if (d < missing) {
      strides[d] = 0;
      continue;
    }
    const size_t size = shape.dims[d - missing];
    strides[d] = size == 1 ? 0 : stride;
    stride *= size;
  }
}

template <typename Op>
void broadcast_binary(const EtnaKernelCall& call, Op op) {
  const Shape& out_shape = output_shape(call);
  const size_t count = out_shape.numel();
  if (count == 0) return;
  const float* a = input_floats(call, 0);
  const float* b = input_floats(call, 1);
  float* out = output_floats(call);
  size_t a_strides[kMaxRank] = {}, b_strides[kMaxRank] = {}, index[kMaxRank] = {};
  broadcast_strides(call.shapes[call.node.inputs[0]], out_shape, a_strides);
  broadcast_strides(call.shapes[call.node.inputs[1]], out_shape, b_strides);
  size_t a_at = 0, b_at = 0;
  for (size_t i = 0; i < count; ++i) {
    out[i] = op(a[a_at], b[b_at]);
    // Odometer over the output's dims, innermost fastest.
    for (size_t d = out_shape.rank; d-- > 0;) {
      a_at += a_strides[d];
      b_at += b_strides[d];
      if (++index[d] < out_shape.dims[d]) break;
      a_at -= a_strides[d] * out_shape.dims[d];
      b_at -= b_strides[d] * out_shape.dims[d];
      index[d] = 0;
    }
  }
}

// Where a window starts along one axis: the padding before the image. With
// SAME padding (flag 0x4) XNNPACK puts the smaller half of the total first.
size_t padding_before(const Node& node, size_t input, size_t output, uint32_t kernel, uint32_t stride,
                      uint32_t dilation, uint32_t explicit_before) {
  if (!(node.flags & 0x4)) return explicit_before;
  const size_t extent = size_t{kernel - 1} * dilation + 1;
  const size_t needed = (output - 1) * stride + extent;
  return needed > input ? (needed - input) / 2 : 0;
}

// Max or average pooling of NHWC windows. Padding is never read: the maximum
// is over the pixels inside the image, and the average divides by how many
// there are, as XNNPACK's kernels do.
template <bool kMax>
Status pool(const EtnaKernelCall& call) {
  const Node& node = call.node;
  const Shape& in = call.shapes[node.inputs[0]];
  const Shape& out = output_shape(call);
  const float* input = input_floats(call, 0);
  float* output = output_floats(call);
  const size_t batch = in.dims[0], height = in.dims[1], width = in.dims[2], channels = in.dims[3];
  const size_t out_h = out.dims[1], out_w = out.dims[2];
  if (out.numel() == 0) return Status::ok();
  const uint32_t dilation_h = kMax ? std::max<uint32_t>(node.dilation_height, 1) : 1;
  const uint32_t dilation_w = kMax ? std::max<uint32_t>(node.dilation_width, 1) : 1;
  const size_t top =
      padding_before(node, height, out_h, node.kernel_height, node.stride_height, dilation_h, node.padding_top);
  const size_t left =
      padding_before(node, width, out_w, node.kernel_width, node.stride_width, dilation_w, node.padding_left);
  std::vector<float> acc(channels);
  for (size_t n = 0; n < batch; ++n) {
    for (size_t oy = 0; oy < out_h; ++oy) {
      for (size_t ox = 0; ox < out_w; ++ox) {
        std::fill(acc.begin(), acc.end(), kMax ? -INFINITY : 0.0f);
        size_t pixels = 0;
        for (size_t ky = 0; ky < node.kernel_height; ++ky) {
          const size_t y = oy * node.stride_height + ky * dilation_h;
          if (y < top || y - top >= height) continue;
          for (size_t kx = 0; kx < node.kernel_width; ++kx) {
            const size_t x = ox * node.stride_width + kx * dilation_w;
            if (x < left || x - left >= width) continue;
            const float* pixel = input + ((n * height + (y - top)) * width + (x - left)) * channels;
            for (size_t c = 0; c < channels; ++c) {
              acc[c] = kMax ? maximum_keeping_nan(acc[c], pixel[c]) : acc[c] + pixel[c];
            }
            ++pixels;
          }
        }
        float* target = output + ((n * out_h + oy) * out_w + ox) * channels;
        for (size_t c = 0; c < channels; ++c) {
          const float value = kMax || pixels == 0 ? acc[c] : acc[c] / static_cast<float>(pixels);
          target[c] = clamp_keeping_nan(value, node.output_min, node.output_max);
        }
      }
    }
  }
  return Status::ok();
}

constexpr uint32_t kMagnitudeBits = 0x7fffffffu;
constexpr uint32_t kInfinityBits = 0x7f800000u;  // above it: NaN

#if defined(__x86_64__) || defined(__i386__)
#define ETNA_SPECIALS_X86 1
// Magnitude bits above or equal to an infinity's are ORed into two masks,
// tested once at the end.
__attribute__((target("avx2"))) FloatSpecials float_specials_avx2(const float* data, size_t count) {
  const __m256i magnitude = _mm256_set1_epi32(static_cast<int>(kMagnitudeBits));
  const __m256i infinity = _mm256_set1_epi32(static_cast<int>(kInfinityBits));
  __m256i nan = _mm256_setzero_si256(), inf = nan;
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    for (size_t k = 0; k < 32; k += 8) {
      const __m256i bits =
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + k)), magnitude);
      nan = _mm256_or_si256(nan, _mm256_cmpgt_epi32(bits, infinity));
      inf = _mm256_or_si256(inf, _mm256_cmpeq_epi32(bits, infinity));
    }
  }
  FloatSpecials found = float_specials_scalar(data + i, count - i);
  found.nan |= !_mm256_testz_si256(nan, nan);
  found.infinity |= !_mm256_testz_si256(inf, inf);
  return found;
}
#elif defined(__aarch64__)
#define ETNA_SPECIALS_NEON 1
// float_specials_avx2's masks, four lanes a register.
FloatSpecials float_specials_neon(const float* data, size_t count) {
  const uint32x4_t magnitude = vdupq_n_u32(kMagnitudeBits), infinity = vdupq_n_u32(kInfinityBits);
  uint32x4_t nan = vdupq_n_u32(0), inf = nan;
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    for (size_t k = 0; k < 16; k += 4) {
      const uint32x4_t bits = vandq_u32(vreinterpretq_u32_f32(vld1q_f32(data + i + k)), magnitude);
      nan = vorrq_u32(nan, vcgtq_u32(bits, infinity));
      inf = vorrq_u32(inf, vceqq_u32(bits, infinity));
    }
  }
  FloatSpecials found = float_specials_scalar(data + i, count - i);
  found.nan |= vmaxvq_u32(nan) != 0;
  found.infinity |= vmaxvq_u32(inf) != 0;
  return found;
}
#endif

}  // namespace

Status run_nan_keeping_kernel(const Graph& graph, const Node& node, const std::vector<Shape>& shapes,
                              void* const* data) {
  const auto run = nan_keeping_kernel_for(graph, node);
  if (!run) return make_error(ErrorCode::kInternal, node.describe() + " has no NaN-keeping kernel");
  return run(EtnaKernelCall{node, shapes, data, sizeof(float), graph});
}

FloatSpecials float_specials_scalar(const float* data, size_t count) {
  uint32_t nan = 0, inf = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, data + i, sizeof bits);
    bits &= kMagnitudeBits;
    nan |= bits > kInfinityBits;
    inf |= bits == kInfinityBits;
  }
  return {nan != 0, inf != 0};
}

namespace {

// The one choice of float_specials' kernel.
enum class ScanPath : uint8_t { kScalar, kAvx2, kNeon };

ScanPath scan_path() {
#ifdef ETNA_SPECIALS_X86
  if (cpu_features().avx2) return ScanPath::kAvx2;
#endif
#ifdef ETNA_SPECIALS_NEON
  if (cpu_features().asimd) return ScanPath::kNeon;
#endif
  return ScanPath::kScalar;
}

}  // namespace

FloatSpecials float_specials(const float* data, size_t count) {
  switch (scan_path()) {
#ifdef ETNA_SPECIALS_X86
    case ScanPath::kAvx2: return float_specials_avx2(data, count);
#endif
#ifdef ETNA_SPECIALS_NEON
    case ScanPath::kNeon: return float_specials_neon(data, count);
#endif
    default: break;
  }
  return float_specials_scalar(data, count);
}

const char* float_specials_path() {
  switch (scan_path()) {
    case ScanPath::kScalar: return "scalar";
    case ScanPath::kAvx2: return "avx2";
    case ScanPath::kNeon: return "neon";
  }
  return "unknown";
}

Status nan_keeping_binary_kernel(const EtnaKernelCall& call) {
  switch (call.node.type) {
    case NodeType::kAdd: broadcast_binary(call, [](float x, float y) { return x + y; }); break;
    case NodeType::kSubtract: broadcast_binary(call, [](float x, float y) { return x - y; }); break;
    case NodeType::kMultiply: broadcast_binary(call, [](float x, float y) { return x * y; }); break;
    case NodeType::kDiv: broadcast_binary(call, [](float x, float y) { return x / y; }); break;
    // XNNPACK's maximum and minimum nodes have no bounds.
    case NodeType::kMaximum: broadcast_binary(call, maximum_keeping_nan); return Status::ok();
    case NodeType::kMinimum: broadcast_binary(call, minimum_keeping_nan); return Status::ok();
    default: return make_error(ErrorCode::kInternal, call.node.describe() + " is not a binary fp32 node");
  }
  if (has_finite_bound(call.node.output_min, call.node.output_max)) {
    clamp_keeping_nan(output_floats(call), output_shape(call).numel(), call.node.output_min, call.node.output_max);
  }
  return Status::ok();
}

Status nan_keeping_clamp_kernel(const EtnaKernelCall& call) {
  const size_t count = output_shape(call).numel();
  const float* input = input_floats(call, 0);
  float* output = output_floats(call);
  for (size_t i = 0; i < count; ++i)
    output[i] = clamp_keeping_nan(input[i], call.node.output_min, call.node.output_max);
  return Status::ok();
}

// XNNPACK's Convert to qint8 or quint8: x times 1 / scale (in float),
// clamped to the codes less the zero point, rounded to nearest even, plus the
// zero point; a NaN becomes the lowest code, as onnxruntime's QuantizeLinear
// makes it, where XNNPACK's kernels leave it to their min/max instructions.
Status nan_keeping_quantize_kernel(const EtnaKernelCall& call) {
  const Value& out = call.graph.values[call.node.outputs[0]];
  const bool is_signed = out.datatype == Datatype::qint8;
  const float lowest = is_signed ? -128.0f : 0.0f;
  const float highest = is_signed ? 127.0f : 255.0f;
  const float inverse_scale = 1.0f / out.quant.scale;
  const float zero_point = static_cast<float>(out.quant.zero_point);
  const size_t count = output_shape(call).numel();
  const float* input = input_floats(call, 0);
  void* output = call.data[call.node.outputs[0]];
  for (size_t i = 0; i < count; ++i) {
    const float scaled = input[i] * inverse_scale;
    const float code =
        std::isnan(scaled)
            ? lowest
            : std::nearbyint(std::min(std::max(scaled, lowest - zero_point), highest - zero_point)) + zero_point;
    if (is_signed) static_cast<int8_t*>(output)[i] = static_cast<int8_t>(code);
    else static_cast<uint8_t*>(output)[i] = static_cast<uint8_t>(code);
  }
  return Status::ok();
}

// The 2022 XNNPACK's sigmoid gives NaN beyond |x| of about 6e26 and for the
// infinities, where the answer is 1 or 0; this one does not.
Status nan_keeping_sigmoid_kernel(const EtnaKernelCall& call) {
  const size_t count = output_shape(call).numel();
  const float* input = input_floats(call, 0);
  float* output = output_floats(call);
  for (size_t i = 0; i < count; ++i) {
    const float x = input[i];
    // exp of the non-positive side only, so nothing overflows.
    const float e = std::exp(-std::fabs(x));
    output[i] = x >= 0.0f ? 1.0f / (1.0f + e) : (std::isnan(x) ? x : e / (1.0f + e));
  }
  return Status::ok();
}

// Over the innermost dim, as torch.softmax: a row holding NaN, or whose
// largest value is infinite, is NaN throughout; -Infinity gives exactly 0.
Status nan_keeping_softmax_kernel(const EtnaKernelCall& call) {
  const Shape& shape = output_shape(call);
  const size_t len = shape.rank ? shape.dims[shape.rank - 1] : 1;
  if (len == 0) return Status::ok();
  const size_t rows = shape.numel() / len;
  const float* input = input_floats(call, 0);
  float* output = output_floats(call);
  for (size_t r = 0; r < rows; ++r) {
    const float* x = input + r * len;
    float* y = output + r * len;
    float top = x[0];
    for (size_t i = 1; i < len; ++i) top = maximum_keeping_nan(top, x[i]);
    if (!std::isfinite(top)) {
      std::fill(y, y + len, NAN);
      continue;
    }
    double sum = 0.0;
    for (size_t i = 0; i < len; ++i) sum += (y[i] = std::exp(x[i] - top));
    const float scale = static_cast<float>(1.0 / sum);
    for (size_t i = 0; i < len; ++i) y[i] *= scale;
  }
  return Status::ok();
}

Status nan_keeping_max_pooling_kernel(const EtnaKernelCall& call) { return pool<true>(call); }
Status nan_keeping_average_pooling_kernel(const EtnaKernelCall& call) { return pool<false>(call); }

// The mean of each image's pixels per channel (NHWC in, N x C elements out).
Status nan_keeping_global_average_pooling_kernel(const EtnaKernelCall& call) {
  const Shape& in = call.shapes[call.node.inputs[0]];
  const size_t batch = in.dims[0], pixels = in.dims[1] * in.dims[2], channels = in.dims[3];
  const float* input = input_floats(call, 0);
  float* output = output_floats(call);
  for (size_t n = 0; n < batch; ++n) {
    float* target = output + n * channels;
    std::fill(target, target + channels, 0.0f);
    for (size_t p = 0; p < pixels; ++p) {
      const float* pixel = input + (n * pixels + p) * channels;
      for (size_t c = 0; c < channels; ++c) target[c] += pixel[c];
    }
    for (size_t c = 0; c < channels; ++c) {
      const float mean = pixels ? target[c] / static_cast<float>(pixels) : NAN;
      target[c] = clamp_keeping_nan(mean, call.node.output_min, call.node.output_max);
    }
  }
  return Status::ok();
}

}  // namespace etna::xnn
