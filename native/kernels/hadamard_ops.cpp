// llama::fast_hadamard_transform, the rotation SpinQuant's native export puts
// before each feed-forward down projection: a Walsh-Hadamard transform of
// every row of the last dim, as ExecuTorch's kernel computes it.
//
// A row of n = 2^k elements: the radix-2 butterflies (x + y, x - y) with the
// partner 1, 2, 4, ... elements away, in that order of stages, then every
// element times 1 / sqrt(n) (one rounded reciprocal, then one multiply each).
// ExecuTorch's float path (FFHT) runs the same stages in the same order, so
// the results agree bit for bit.
// A row of n = 28 * 2^k: read as 28 rows of 2^k, each transformed as above,
// then every column of 28 multiplied by the 28 x 28 Hadamard matrix below,
// which is not normalized: the whole transform is sqrt(28) times an
// orthonormal one (ExecuTorch's kernel does this too).
//
// float32 and float64 compute in their own type. float16 follows ExecuTorch's
// Half type, which computes each operation in float and rounds it to float16,
// except where an expression starts from a float (a 28-sum whose first term
// is +x[0] runs in float and rounds once at the end). ExecuTorch's kernel has
// no bfloat16 case; bfloat16 here computes as that kernel's template would
// with its BFloat16 type, which behaves as Half does: each operation in float,
// rounded to bfloat16.

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/real_elements.h"

namespace etna::kernels {
namespace {

// Williamson's 28 x 28 Hadamard matrix as SpinQuant and ExecuTorch use it,
// row i column j: '+' is 1, '-' is -1. (H H^T = 28 I; native/test checks it.)
constexpr const char* kHadamard28[28] = {
    "+------++----++-+--+-+--++--", "-+-----+++-----+-+--+-+--++-", "--+-----+++---+-+-+----+--++",
    "---+-----+++---+-+-+-+--+--+", "----+-----+++---+-+-+++--+--", "-----+-----++++--+-+--++--+-",
    "------++----++-+--+-+--++--+", "--++++-+-------++--+++-+--+-", "---++++-+-----+-++--+-+-+--+",
    "+---+++--+----++-++--+-+-+--", "++---++---+----++-++--+-+-+-", "+++---+----+----++-++--+-+-+",
    "++++--------+-+--++-++--+-+-", "-++++--------+++--++--+--+-+", "-+-++-++--++--+--------++++-",
    "+-+-++--+--++--+--------++++", "-+-+-++--+--++--+----+---+++", "+-+-+-++--+--+---+---++---++",
    "++-+-+-++--+------+--+++---+", "-++-+-+-++--+------+-++++---", "+-++-+---++--+------+-++++--",
    "-++--++-+-++-+++----++------", "+-++--++-+-++-+++-----+-----", "++-++---+-+-++-+++-----+----",
    "-++-++-+-+-+-+--+++-----+---", "--++-++++-+-+----+++-----+--", "+--++-+-++-+-+----+++-----+-",
    "++--++-+-++-+-+----++------+",
};

// Arithmetic in a row's storage type. `Value` holds an element; `round` is
// what storing an operation's result does to it.
struct FloatArith {
  using Value = float;
  static float round(float x) { return x; }
};
struct DoubleArith {
  using Value = double;
  static double round(double x) { return x; }
};
// float16 values held as floats (exact); each operation rounds to float16.
struct HalfArith {
  using Value = float;
  static float round(float x) { return half_to_float(float_to_half(x)); }
  static float widen(uint16_t bits) { return half_to_float(bits); }
  static uint16_t narrow(float x) { return float_to_half(x); }
};
// bfloat16 likewise.
struct BFloat16Arith {
  using Value = float;
  static float round(float x) { return bfloat16_to_float(float_to_bfloat16(x)); }
  static float widen(uint16_t bits) { return bfloat16_to_float(bits); }
  static uint16_t narrow(float x) { return float_to_bfloat16(x); }
};

// In-place transform of `n` = 2^log2_n elements, normalized.
template <typename A>
void transform_power_of_two(typename A::Value* row, int64_t n, int log2_n) {
  using V = typename A::Value;
  for (int64_t step = 1; step < n; step *= 2) {
    for (int64_t block = 0; block < n; block += 2 * step) {
      for (int64_t i = block; i < block + step; ++i) {
        const V x = row[i];
        const V y = row[i + step];
        row[i] = A::round(x + y);
        row[i + step] = A::round(x - y);
      }
    }
  }
  if (log2_n == 0) return;  // ExecuTorch skips the (identity) normalization of a single element
  // 1 / (2^(k/2) * (k odd ? sqrt(2) : 1)), each step rounded as the type does.
  const V root_two = A::round(static_cast<V>(std::sqrt(2.0)));
  const V root_n = A::round(A::round(static_cast<V>(std::ldexp(1.0, log2_n / 2))) * (log2_n % 2 ? root_two : V(1)));
  const V inverse = A::round(V(1) / root_n);
  for (int64_t i = 0; i < n; ++i) row[i] = A::round(row[i] * inverse);
}

// Column `column` of a 28 x `stride` row-major block times kHadamard28, each
// output summed left to right from its first term.
template <typename A>
void multiply_28(typename A::Value* block, int64_t stride, int64_t column) {
  using V = typename A::Value;
  V x[28];
  V out[28];
  for (int i = 0; i < 28; ++i) x[i] = block[i * stride + column];
  for (int i = 0; i < 28; ++i) {
    const char* signs = kHadamard28[i];
    // A first term of -x[0] is a rounded negation: float16 then rounds every
    // step; +x[0] is a plain float, and the sum rounds only when stored.
    const bool rounds_each_step = signs[0] == '-';
    V sum = signs[0] == '+' ? x[0] : -x[0];
    for (int j = 1; j < 28; ++j) {
      sum = signs[j] == '+' ? sum + x[j] : sum - x[j];
      if (rounds_each_step) sum = A::round(sum);
    }
    out[i] = A::round(sum);
  }
  for (int i = 0; i < 28; ++i) block[i * stride + column] = out[i];
}

template <typename A>
void transform_row(typename A::Value* row, int64_t power, int log2_power, bool times_28) {
  if (!times_28) {
    transform_power_of_two<A>(row, power, log2_power);
    return;
  }
  for (int i = 0; i < 28; ++i) transform_power_of_two<A>(row + i * power, power, log2_power);
  for (int64_t column = 0; column < power; ++column) multiply_28<A>(row, power, column);
}

// Transforms `rows` rows of `width` elements of out in place.
template <typename A, typename Stored>
void transform_rows(Stored* data, int64_t rows, int64_t width, int64_t power, int log2_power, bool times_28) {
  for (int64_t r = 0; r < rows; ++r) transform_row<A>(data + r * width, power, log2_power, times_28);
}

// 16-bit rows are widened into `row` (width floats), transformed, narrowed back.
template <typename A>
void transform_16bit_rows(uint16_t* data, int64_t rows, int64_t width, int64_t power, int log2_power, bool times_28,
                          float* row) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* bits = data + r * width;
    for (int64_t i = 0; i < width; ++i) row[i] = A::widen(bits[i]);
    transform_row<A>(row, power, log2_power, times_28);
    for (int64_t i = 0; i < width; ++i) bits[i] = A::narrow(row[i]);
  }
}

// llama::fast_hadamard_transform.out(Tensor mat, *, Tensor(a!) out) -> Tensor(a!)
Status fast_hadamard_transform_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * mat, op.input(0, "mat"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(1, "out"));
  const ScalarType dtype = mat->dtype();
  const bool sixteen_bit = dtype == ScalarType::kHalf || dtype == ScalarType::kBFloat16;
  if (dtype != ScalarType::kFloat && dtype != ScalarType::kDouble && !sixteen_bit) {
    return op.program_error("mat must be float32, float64, float16 or bfloat16, got " + mat->describe());
  }
  ETNA_TRY(op.expect_dtype(*out, "out", dtype));
  const int64_t width = mat->rank() == 0 ? 1 : mat->size(mat->rank() - 1);
  const bool times_28 = width > 0 && width % 28 == 0;
  const int64_t power = times_28 ? width / 28 : width;
  if (mat->numel() > 0 && (power & (power - 1)) != 0) {
    return op.input_error("mat " + mat->describe() + ": the last dim must be a power of 2 or 28 times one, got " +
                          std::to_string(width));
  }
  ETNA_KERNEL_ASSIGN(auto wide_row, widening_row(dtype, mat->numel() > 0 ? width : 0));
  ETNA_TRY(op.prepare_output(*out, Shape::of(*mat)));
  if (mat->numel() == 0) return Status::ok();
  if (out->data() != mat->data()) std::memcpy(out->data(), mat->data(), mat->nbytes());
  int log2_power = 0;
  while ((int64_t{1} << log2_power) < power) ++log2_power;
  const int64_t rows = static_cast<int64_t>(mat->numel()) / width;
  switch (dtype) {
    case ScalarType::kFloat:
      transform_rows<FloatArith>(out->data_as<float>(), rows, width, power, log2_power, times_28);
      return Status::ok();
    case ScalarType::kDouble:
      transform_rows<DoubleArith>(out->data_as<double>(), rows, width, power, log2_power, times_28);
      return Status::ok();
    case ScalarType::kHalf:
      transform_16bit_rows<HalfArith>(out->data_as<uint16_t>(), rows, width, power, log2_power, times_28,
                                      wide_row.get());
      return Status::ok();
    default:
      transform_16bit_rows<BFloat16Arith>(out->data_as<uint16_t>(), rows, width, power, log2_power, times_28,
                                          wide_row.get());
      return Status::ok();
  }
}

}  // namespace

void register_hadamard_kernels(KernelRegistry& registry) {
  registry.add({"llama::fast_hadamard_transform.out", 3, fast_hadamard_transform_out});
}

}  // namespace etna::kernels
