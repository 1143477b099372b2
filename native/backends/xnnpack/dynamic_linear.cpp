#include "backends/xnnpack/dynamic_linear.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ETNA_DYNQUANT_X86 1
#endif

namespace etna::xnn {
namespace {

constexpr size_t kChunk = 64;     // input channels per packed chunk (32 bytes of 4-bit codes)
constexpr size_t kHalf = 32;      // input channels one AVX2 register holds
constexpr size_t kColumns = 8;    // output channels computed together
constexpr int kFourBitZero = 8;   // 4-bit codes store value + 8, as the exporter writes them

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// What the dot-product paths read: the packed weights and their geometry.
struct PackedView {
  const uint8_t* codes;
  const float* scales;
  size_t row_bytes;  // bytes per output channel in `codes`
  size_t padded_out;
  size_t blocks;
  size_t block_length;
  bool four_bit;
};

// The signed weight at (channel n, input k) of the packed layout.
int weight_at(const PackedView& w, size_t n, size_t k) {
  const uint8_t* row = w.codes + n * w.row_bytes;
  if (!w.four_bit) return static_cast<int8_t>(row[k]);
  const size_t within = k % kChunk;
  const uint8_t byte = row[k / kChunk * (kChunk / 2) + within % kHalf];
  return (within < kHalf ? byte & 0xF : byte >> 4) - kFourBitZero;
}

// sums[r * padded_out + n] = sum over blocks b of (float)D(r, n, b) * scale(n, b),
// accumulated in block order with fused multiply-adds, where D is the exact
// int32 dot product of activation row r and channel n over block b.
void dot_rows_scalar(const PackedView& w, const uint8_t* const* rows, size_t row_count, float* sums) {
  for (size_t r = 0; r < row_count; ++r) {
    const uint8_t* a = rows[r];
    for (size_t n = 0; n < w.padded_out; ++n) {
      float acc = 0.0f;
      for (size_t b = 0; b < w.blocks; ++b) {
        int32_t dot = 0;
        const size_t begin = b * w.block_length;
        for (size_t k = begin; k < begin + w.block_length; ++k) dot += int32_t{a[k]} * weight_at(w, n, k);
        const float scale = w.scales[(n / kColumns * w.blocks + b) * kColumns + n % kColumns];
        acc = std::fma(static_cast<float>(dot), scale, acc);
      }
      sums[r * w.padded_out + n] = acc;
    }
  }
}

#ifdef ETNA_DYNQUANT_X86

// 32 signed weights: half `h` (input channels 32h..32h+31) of a channel's row.
template <bool kFourBit>
__attribute__((target("avx2,fma"))) inline __m256i weights_half(const uint8_t* row, size_t h) {
  if (!kFourBit) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + h * kHalf));
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + h / 2 * kHalf));
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i codes = (h & 1) ? _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles)
                                : _mm256_and_si256(packed, low_nibbles);
  return _mm256_sub_epi8(codes, _mm256_set1_epi8(kFourBitZero));
}

// Eight int32 lanes whose sum is the dot product of 32 unsigned activations
// and 32 signed weights. 4-bit weights fit maddubs without saturation
// (2 * 255 * 8 < 32768); 8-bit ones are widened first.
template <bool kFourBit>
__attribute__((target("avx2,fma"))) inline __m256i dot_half(__m256i a, __m256i w) {
  const __m256i ones = _mm256_set1_epi16(1);
  if (kFourBit) return _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), ones);
  const __m256i a_low = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(a));
  const __m256i a_high = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(a, 1));
  const __m256i w_low = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w));
  const __m256i w_high = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1));
  return _mm256_add_epi32(_mm256_madd_epi16(a_low, w_low), _mm256_madd_epi16(a_high, w_high));
}

// The lane sums of eight vectors, one per channel, as eight int32 (exact).
__attribute__((target("avx2,fma"))) inline __m256i sum_lanes(const __m256i* lanes) {
  const __m256i p0 = _mm256_hadd_epi32(lanes[0], lanes[1]);
  const __m256i p1 = _mm256_hadd_epi32(lanes[2], lanes[3]);
  const __m256i p2 = _mm256_hadd_epi32(lanes[4], lanes[5]);
  const __m256i p3 = _mm256_hadd_epi32(lanes[6], lanes[7]);
  const __m256i q0 = _mm256_hadd_epi32(p0, p1);
  const __m256i q1 = _mm256_hadd_epi32(p2, p3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

template <bool kFourBit, size_t kRows>
__attribute__((target("avx2,fma"))) void dot_rows_avx2_tile(const PackedView& w, const uint8_t* const* rows,
                                                             float* sums) {
  const size_t halves_per_block = w.block_length / kHalf;
  for (size_t group = 0; group < w.padded_out / kColumns; ++group) {
    const uint8_t* group_rows = w.codes + group * kColumns * w.row_bytes;
    __m256 acc[kRows];
    for (size_t r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    for (size_t b = 0; b < w.blocks; ++b) {
      const size_t first = b * halves_per_block;
      __m256i lanes[kRows][kColumns];
      for (size_t j = 0; j < kColumns; ++j) {
        const uint8_t* row = group_rows + j * w.row_bytes;
        for (size_t r = 0; r < kRows; ++r) lanes[r][j] = _mm256_setzero_si256();
        for (size_t h = first; h < first + halves_per_block; ++h) {
          const __m256i weights = weights_half<kFourBit>(row, h);
          for (size_t r = 0; r < kRows; ++r) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + h * kHalf));
            lanes[r][j] = _mm256_add_epi32(lanes[r][j], dot_half<kFourBit>(a, weights));
          }
        }
      }
      const __m256 scales = _mm256_loadu_ps(w.scales + (group * w.blocks + b) * kColumns);
      for (size_t r = 0; r < kRows; ++r) {
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_lanes(lanes[r])), scales, acc[r]);
      }
    }
    for (size_t r = 0; r < kRows; ++r) _mm256_storeu_ps(sums + r * w.padded_out + group * kColumns, acc[r]);
  }
}

template <bool kFourBit>
void dot_rows_avx2_typed(const PackedView& w, const uint8_t* const* rows, size_t row_count, float* sums) {
  size_t r = 0;
  for (; r + 2 <= row_count; r += 2) dot_rows_avx2_tile<kFourBit, 2>(w, rows + r, sums + r * w.padded_out);
  for (; r < row_count; ++r) dot_rows_avx2_tile<kFourBit, 1>(w, rows + r, sums + r * w.padded_out);
}

void dot_rows_avx2(const PackedView& w, const uint8_t* const* rows, size_t row_count, float* sums) {
  if (w.four_bit) {
    dot_rows_avx2_typed<true>(w, rows, row_count, sums);
  } else {
    dot_rows_avx2_typed<false>(w, rows, row_count, sums);
  }
}

#endif  // ETNA_DYNQUANT_X86

// -1: no forced path.
std::atomic<int> forced_path{-1};

DotPath best_available_path() {
#ifdef ETNA_DYNQUANT_X86
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) return DotPath::kAvx2;
#endif
  return DotPath::kScalar;
}

// Per-row parameters of XNNPACK's qd8 conversion: the range [min(0, lo),
// max(0, hi)] mapped onto [-128, 127], the zero point nudged to an integer.
// fmin/fmax keep NaN and infinity from reaching an integer conversion.
DynamicRowParams choose_row_params(const float* x, size_t count, float& multiplier) {
  float lo = 0.0f, hi = 0.0f;
  for (size_t i = 0; i < count; ++i) {
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  const float qmin = -128.0f, qmax = 127.0f;
  const float inverse = lo == hi ? 1.0f : (qmax - qmin) / (hi - lo);
  const float scaled_lo = lo * inverse, scaled_hi = hi * inverse;
  float zero = (qmin + scaled_lo) + (qmax + scaled_hi) > 0 ? qmin - scaled_lo : qmax - scaled_hi;
  zero = std::fmin(std::fmax(zero, qmin), qmax);
  DynamicRowParams params;
  params.scale = 1.0f / inverse;
  params.zero_point = static_cast<int32_t>(std::nearbyint(zero));
  // XNNPACK converts with the reciprocal of the stored scale, not `inverse`.
  multiplier = 1.0f / params.scale;
  return params;
}

}  // namespace

DotPath active_dot_path() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<DotPath>(forced) : best_available_path();
}

const char* dot_path_name(DotPath path) { return path == DotPath::kAvx2 ? "avx2" : "scalar"; }

bool dot_path_available(DotPath path) {
  return path == DotPath::kScalar || best_available_path() == DotPath::kAvx2;
}

void force_dot_path(DotPath path) { forced_path.store(static_cast<int>(path), std::memory_order_relaxed); }
void clear_forced_dot_path() { forced_path.store(-1, std::memory_order_relaxed); }

Status quantize_per_token_kernel(const OwnKernelCall& call) {
  const Shape& shape = call.shapes[call.node.outputs[0]];
  const size_t row_length = shape.rank ? shape.dims[shape.rank - 1] : 1;
  const size_t rows = row_count(shape);
  const float* input = static_cast<const float*>(call.data[call.node.inputs[0]]);
  uint8_t* output = static_cast<uint8_t*>(call.data[call.node.outputs[0]]);
  auto* params = reinterpret_cast<DynamicRowParams*>(output + dynamic_params_offset(shape));
  for (size_t r = 0; r < rows; ++r) {
    const float* x = input + r * row_length;
    uint8_t* q = output + r * row_length;
    float multiplier = 1.0f;
    DynamicRowParams row = choose_row_params(x, row_length, multiplier);
    const float low = static_cast<float>(-128 - row.zero_point), high = static_cast<float>(127 - row.zero_point);
    for (size_t i = 0; i < row_length; ++i) {
      const float v = std::fmin(std::fmax(x[i] * multiplier, low), high);
      // Stored unsigned: the int8 code plus 128 (see DynamicRowParams).
      q[i] = static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(v)) + row.zero_point + 128);
    }
    row.zero_point += 128;
    std::memcpy(params + r, &row, sizeof row);
  }
  return Status::ok();
}

Result<std::unique_ptr<DynamicLinear>> DynamicLinear::create(const Graph& graph, const Node& node) {
  const Value& filter = graph.values[node.inputs[1]];
  const Value* bias = node.inputs[2] == kNoValue ? nullptr : &graph.values[node.inputs[2]];
  const bool transposed = node.flags & 0x1;
  std::unique_ptr<DynamicLinear> linear(new DynamicLinear());
  DynamicLinear& l = *linear;
  l.out_channels_ = filter.shape.dims[transposed ? 1 : 0];
  l.in_channels_ = filter.shape.dims[transposed ? 0 : 1];
  l.padded_in_ = std::max(kChunk, round_up(l.in_channels_, kChunk));
  l.padded_out_ = std::max(kColumns, round_up(l.out_channels_, kColumns));
  l.four_bit_ = is_four_bit(filter.datatype);
  const bool blockwise = filter.quant.kind == Quantization::Kind::kBlockwise;
  l.block_length_ = blockwise ? filter.quant.block_size : l.padded_in_;
  l.blocks_ = blockwise ? l.in_channels_ / l.block_length_ : 1;
  l.output_min_ = node.output_min;
  l.output_max_ = node.output_max;
  const size_t n_count = l.out_channels_, k_count = l.in_channels_;
  if (filter.constant.size < constant_bytes(filter.datatype, filter.shape)) {
    return make_error(ErrorCode::kInternal, node.describe() + ": filter bytes missing at packing");
  }

  // Unpacked signed weights [N, K] first, then the packed layout.
  const uint8_t* source = filter.constant.data;
  const size_t source_row = l.four_bit_ ? (k_count + 1) / 2 : k_count;
  auto source_weight = [&](size_t n, size_t k) -> int {
    if (l.four_bit_) {
      const uint8_t byte = source[n * source_row + k / 2];
      return ((k % 2) ? byte >> 4 : byte & 0xF) - kFourBitZero;
    }
    return static_cast<int8_t>(transposed ? source[k * n_count + n] : source[n * source_row + k]);
  };
  const size_t row_bytes = l.four_bit_ ? l.padded_in_ / 2 : l.padded_in_;
  l.codes_.assign(l.padded_out_ * row_bytes + kChunk, l.four_bit_ ? 0x88 : 0);
  l.scales_.assign(l.padded_out_ * l.blocks_, 0.0f);
  l.correction_.assign(l.padded_out_, 0.0f);
  l.bias_.assign(l.padded_out_, 0.0f);
  for (size_t n = 0; n < n_count; ++n) {
    uint8_t* row = l.codes_.data() + n * row_bytes;
    float correction = 0.0f;
    for (size_t b = 0; b < l.blocks_; ++b) {
      int32_t weight_sum = 0;
      const size_t end = std::min(k_count, (b + 1) * l.block_length_);
      for (size_t k = b * l.block_length_; k < end; ++k) {
        const int w = source_weight(n, k);
        weight_sum += w;
        if (l.four_bit_) {
          const size_t within = k % kChunk;
          uint8_t& byte = row[k / kChunk * (kChunk / 2) + within % kHalf];
          const uint8_t code = static_cast<uint8_t>(w + kFourBitZero);
          byte = within < kHalf ? static_cast<uint8_t>((byte & 0xF0) | code)
                                : static_cast<uint8_t>((byte & 0x0F) | (code << 4));
        } else {
          row[k] = static_cast<uint8_t>(static_cast<int8_t>(w));
        }
      }
      const float scale = blockwise ? filter.quant.channel_scales[n * l.blocks_ + b] : filter.quant.channel_scales[n];
      l.scales_[(n / kColumns * l.blocks_ + b) * kColumns + n % kColumns] = scale;
      correction = std::fma(static_cast<float>(weight_sum), scale, correction);
    }
    l.correction_[n] = correction;
  }
  if (bias && bias->constant.size) std::memcpy(l.bias_.data(), bias->constant.data, n_count * sizeof(float));
  return linear;
}

size_t DynamicLinear::packed_bytes() const {
  return codes_.size() + (scales_.size() + correction_.size() + bias_.size()) * sizeof(float);
}

Status DynamicLinear::run(const Node& node, const Shape& input_shape, const void* input, float* output) const {
  const size_t row_length = input_shape.rank ? input_shape.dims[input_shape.rank - 1] : 1;
  if (row_length != in_channels_) {
    return make_error(ErrorCode::kInvalidInput, node.describe() + ": input rows have " + std::to_string(row_length) +
                                                    " elements, the filter takes " + std::to_string(in_channels_));
  }
  const size_t rows = row_count(input_shape);
  const uint8_t* data = static_cast<const uint8_t*>(input);
  const auto* params = reinterpret_cast<const DynamicRowParams*>(data + dynamic_params_offset(input_shape));
  const PackedView view{codes_.data(),   scales_.data(), four_bit_ ? padded_in_ / 2 : padded_in_, padded_out_,
                        blocks_,         block_length_,  four_bit_};
  DotPath path = active_dot_path();
  if (block_length_ % kHalf != 0) path = DotPath::kScalar;  // blocks the registers cannot hold whole

  // Rows are read whole chunks at a time: the bytes past a row are the next
  // row's or the buffer's read padding, and meet zero weights.
  constexpr size_t kTileRows = 16;
  std::vector<float> sums(kTileRows * padded_out_);
  float* tile_sums = sums.data();
  const uint8_t* tile_rows[kTileRows];
  for (size_t first = 0; first < rows; first += kTileRows) {
    const size_t count = std::min(kTileRows, rows - first);
    for (size_t r = 0; r < count; ++r) tile_rows[r] = data + (first + r) * row_length;
#ifdef ETNA_DYNQUANT_X86
    if (path == DotPath::kAvx2) {
      dot_rows_avx2(view, tile_rows, count, tile_sums);
    } else {
      dot_rows_scalar(view, tile_rows, count, tile_sums);
    }
#else
    dot_rows_scalar(view, tile_rows, count, tile_sums);
#endif
    // y = act_scale * (sum - act_zero * sum of scaled weights) + bias, clamped.
    for (size_t r = 0; r < count; ++r) {
      DynamicRowParams p;
      std::memcpy(&p, params + first + r, sizeof p);
      const float zero = static_cast<float>(p.zero_point);
      float* out = output + (first + r) * out_channels_;
      const float* s = tile_sums + r * padded_out_;
      for (size_t n = 0; n < out_channels_; ++n) {
        const float y = p.scale * (s[n] - zero * correction_[n]) + bias_[n];
        out[n] = std::fmin(std::fmax(y, output_min_), output_max_);
      }
    }
  }
  return Status::ok();
}

}  // namespace etna::xnn
