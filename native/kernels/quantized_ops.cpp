// ExecuTorch's quantized_decomposed operators: affine quantize/dequantize
// (per tensor, per channel, per token), choosing quantization parameters, and
// quantized embedding lookups with 8-, 4- and 2-bit weights.
//
// Arithmetic follows ExecuTorch's portable quantized kernels:
// - quantize: q = clamp(int32(zero_point) + nearbyint(float(1/float(scale)) * x), quant_min, quant_max),
//   in float, ties to even;
// - dequantize: x = (q - int32(zero_point)) * float(scale);
// - embeddings: (w - zero_point) * scale per row (or per group of a row); a
//   4-bit byte holds element 2i in its high nibble and 2i+1 in its low one, a
//   2-bit byte holds element 4i in bits 0-1 up to 4i+3 in bits 6-7, both
//   stored with an offset (8 and 2) rather than as two's complement.
// quant_min and quant_max of embeddings and dequantize are metadata only.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/element_access.h"
#include "kernels/kernel_groups.h"
#include "kernels/kernel_shape.h"
#include "kernels/op_args.h"
#include "kernels/real_elements.h"

namespace etna::kernels {
namespace {

// ---- element access for the integer dtypes quantized tensors use ----

bool is_quantized_dtype(ScalarType type) {
  switch (type) {
    case ScalarType::kByte:
    case ScalarType::kChar:
    case ScalarType::kShort:
    case ScalarType::kInt:
    case ScalarType::kUInt16:
    case ScalarType::kBits16: return true;
    default: return false;
  }
}

struct IntRange {
  int64_t min;
  int64_t max;
};

IntRange range_of(ScalarType type) {
  switch (type) {
    case ScalarType::kByte: return {0, 255};
    case ScalarType::kChar: return {-128, 127};
    case ScalarType::kShort: return {-32768, 32767};
    case ScalarType::kUInt16:
    case ScalarType::kBits16: return {0, 65535};
    default: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
}

int32_t load_quantized(ScalarType type, const void* base, int64_t i) {
  switch (type) {
    case ScalarType::kByte: return static_cast<const uint8_t*>(base)[i];
    case ScalarType::kChar: return static_cast<const int8_t*>(base)[i];
    case ScalarType::kShort: return static_cast<const int16_t*>(base)[i];
    case ScalarType::kUInt16:
    case ScalarType::kBits16: return static_cast<const uint16_t*>(base)[i];
    default: return static_cast<const int32_t*>(base)[i];
  }
}

void store_quantized(ScalarType type, void* base, int64_t i, int64_t value) {
  switch (type) {
    case ScalarType::kByte: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(value); break;
    case ScalarType::kChar: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(value); break;
    case ScalarType::kShort: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(value); break;
    case ScalarType::kUInt16:
    case ScalarType::kBits16: static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(value); break;
    default: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(value); break;
  }
}

// A quantization parameter element: scales are real, zero points real or
// integer (exporters write int64, int32 or the scales' float dtype).
bool is_parameter_dtype(ScalarType type) {
  return is_real_dtype(type) || type == ScalarType::kLong || type == ScalarType::kInt;
}

double load_parameter(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case ScalarType::kLong: return static_cast<double>(t.data_as<const int64_t>()[i]);
    case ScalarType::kInt: return t.data_as<const int32_t>()[i];
    case ScalarType::kDouble: return t.data_as<const double>()[i];
    default: return load_real(t.dtype(), t.data(), i);
  }
}

void store_parameter(Tensor& t, int64_t i, double value) {
  switch (t.dtype()) {
    case ScalarType::kLong: t.data_as<int64_t>()[i] = static_cast<int64_t>(value); break;
    case ScalarType::kInt: t.data_as<int32_t>()[i] = static_cast<int32_t>(value); break;
    case ScalarType::kDouble: t.data_as<double>()[i] = value; break;
    default: store_real(t.dtype(), t.data(), i, static_cast<float>(value)); break;
  }
}

Status expect_parameters(const OpArgs& op, const Tensor& t, std::string_view name, int64_t count) {
  if (!is_parameter_dtype(t.dtype())) {
    return op.program_error(std::string(name) + " must be a float or integer tensor, got " + t.describe());
  }
  if (static_cast<int64_t>(t.numel()) != count) {
    return op.input_error(std::string(name) + " " + t.describe() + " must hold " + std::to_string(count) + " value(s)");
  }
  return Status::ok();
}

// One (scale, zero point) per channel, read from tensors; without zero
// points the zero point is 0.
struct ChannelParameters {
  const Tensor* scales;
  const Tensor* zero_points;  // may be null

  std::pair<double, double> operator()(int64_t channel) const {
    return {load_parameter(*scales, channel), zero_points ? load_parameter(*zero_points, channel) : 0.0};
  }
};

// Checks that scales (and zero points, when given) hold `count` values each.
Result<ChannelParameters> channel_parameters(const OpArgs& op, const Tensor* scales, const Tensor* zero_points,
                                             int64_t count) {
  ETNA_TRY(expect_parameters(op, *scales, "scales", count));
  if (zero_points != nullptr) ETNA_TRY(expect_parameters(op, *zero_points, "zero_points", count));
  return ChannelParameters{scales, zero_points};
}

Result<ScalarType> dtype_arg(const OpArgs& op, size_t index, std::string_view name) {
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> dtype, op.optional_dtype_arg(index, name));
  if (!dtype) return op.program_error(OpArgs::arg_label(index, name) + " must be a dtype, got None");
  return *dtype;
}

struct QuantRange {
  int64_t quant_min;
  int64_t quant_max;
  ScalarType dtype;
};

// The `int quant_min, int quant_max, ScalarType dtype` run every affine op has.
Result<QuantRange> quant_range_args(const OpArgs& op, size_t first) {
  ETNA_KERNEL_ASSIGN(int64_t quant_min, op.int_arg(first, "quant_min"));
  ETNA_KERNEL_ASSIGN(int64_t quant_max, op.int_arg(first + 1, "quant_max"));
  ETNA_KERNEL_ASSIGN(ScalarType dtype, dtype_arg(op, first + 2, "dtype"));
  return QuantRange{quant_min, quant_max, dtype};
}

// ---- quantize ----

int64_t quantize_value(float value, float inverse_scale, int32_t zero_point, int64_t quant_min, int64_t quant_max) {
  const float scaled = std::nearbyint(inverse_scale * value);
  // Out-of-range floats saturate before the clamp (ExecuTorch's cast would be undefined there).
  const int64_t rounded = convert_value<int64_t>(static_cast<double>(scaled));
  const int64_t q = static_cast<int64_t>(zero_point) + rounded;
  return std::min(std::max(q, quant_min), quant_max);
}

// Checks shared by every quantize: input real, out of `dtype`, the range within it.
Status check_quantize(const OpArgs& op, const Tensor& input, const Tensor& out, ScalarType dtype, int64_t quant_min,
                      int64_t quant_max) {
  if (!is_real_dtype(input.dtype())) return op.program_error("input must be floating point, got " + input.describe());
  if (!is_quantized_dtype(dtype)) {
    return op.program_error("dtype " + std::string(dtype_name(dtype)) + " is not a quantized integer dtype");
  }
  ETNA_TRY(op.expect_dtype(out, "out", dtype));
  const IntRange range = range_of(dtype);
  if (quant_min < range.min || quant_max > range.max || quant_min > quant_max) {
    return op.input_error("quant range [" + std::to_string(quant_min) + ", " + std::to_string(quant_max) +
                          "] does not fit " + std::string(dtype_name(dtype)));
  }
  return Status::ok();
}

// Quantizes `input` with one (scale, zero point) per block of `block` elements
// cycling through `channels` parameter pairs: channel = (i / block) % channels.
Status quantize_blocks(const OpArgs& op, const Tensor& input, Tensor& out, int64_t block, int64_t channels,
                       const std::function<std::pair<double, double>(int64_t)>& parameters, int64_t quant_min,
                       int64_t quant_max) {
  ETNA_TRY(op.prepare_output(out, Shape::of(input)));
  const int64_t n = static_cast<int64_t>(input.numel());
  for (int64_t start = 0, index = 0; start < n; start += block, ++index) {
    const auto [scale, zero_point] = parameters(channels == 0 ? 0 : index % channels);
    const float inverse_scale = 1.0f / static_cast<float>(scale);
    const int32_t zp = static_cast<int32_t>(zero_point);
    const int64_t end = std::min(n, start + block);
    for (int64_t i = start; i < end; ++i) {
      store_quantized(
          out.dtype(), out.data(), i,
          quantize_value(load_real(input.dtype(), input.data(), i), inverse_scale, zp, quant_min, quant_max));
    }
  }
  return Status::ok();
}

Status quantize_per_tensor(const OpArgs& op, const Tensor& input, double scale, int64_t zero_point, int64_t quant_min,
                           int64_t quant_max, ScalarType dtype, Tensor& out) {
  ETNA_TRY(check_quantize(op, input, out, dtype, quant_min, quant_max));
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(input.numel()));
  return quantize_blocks(
      op, input, out, n, 1, [&](int64_t) { return std::pair<double, double>(scale, static_cast<double>(zero_point)); },
      quant_min, quant_max);
}

// quantized_decomposed::quantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
//   int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
Status quantize_per_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(double scale, op.double_arg(1, "scale"));
  ETNA_KERNEL_ASSIGN(int64_t zero_point, op.int_arg(2, "zero_point"));
  ETNA_KERNEL_ASSIGN(QuantRange range, quant_range_args(op, 3));
  const auto [quant_min, quant_max, dtype] = range;
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(6, "out"));
  return quantize_per_tensor(op, *input, scale, zero_point, quant_min, quant_max, dtype, *out);
}

// One-element scale and zero point tensors.
Result<std::pair<double, int64_t>> scalar_parameters(const OpArgs& op, size_t scale_index, size_t zero_point_index) {
  ETNA_KERNEL_ASSIGN(Tensor * scale, op.input(scale_index, "scale"));
  ETNA_KERNEL_ASSIGN(Tensor * zero_point, op.input(zero_point_index, "zero_point"));
  ETNA_TRY(expect_parameters(op, *scale, "scale", 1));
  ETNA_TRY(expect_parameters(op, *zero_point, "zero_point", 1));
  return std::pair<double, int64_t>(load_parameter(*scale, 0), static_cast<int64_t>(load_parameter(*zero_point, 0)));
}

// quantized_decomposed::quantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point,
//   int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
Status quantize_per_tensor_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(auto parameters, scalar_parameters(op, 1, 2));
  ETNA_KERNEL_ASSIGN(QuantRange range, quant_range_args(op, 3));
  const auto [quant_min, quant_max, dtype] = range;
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(6, "out"));
  return quantize_per_tensor(op, *input, parameters.first, parameters.second, quant_min, quant_max, dtype, *out);
}

// Elements after `axis` form one block; blocks cycle through the axis' channels.
int64_t trailing_elements(const Tensor& t, size_t axis) {
  int64_t block = 1;
  for (size_t d = axis + 1; d < t.rank(); ++d) block *= t.size(d);
  return block;
}

// Tokens are the rows of the last dim: one (scale, zero point) per row.
int64_t token_count(const Tensor& t) {
  int64_t tokens = 1;
  for (size_t d = 0; d + 1 < t.rank(); ++d) tokens *= t.size(d);
  return tokens;
}

int64_t token_width(const Tensor& t) { return t.rank() == 0 ? 1 : t.size(t.rank() - 1); }

// How elements pair with parameters: blocks of `block` elements cycle through
// `channels` (scale, zero point) pairs.
struct Blocks {
  int64_t block;
  int64_t channels;
  ChannelParameters parameters;
};

// The arguments the per-channel and per-token ops lead with: input, scales
// and zero_points (one per channel or token), the axis (per-channel ops
// only) and the range.
struct GroupedArgs {
  Tensor* input = nullptr;
  Tensor* scales = nullptr;
  Tensor* zero_points = nullptr;  // may be null where optional
  std::optional<int64_t> axis;
  QuantRange range{};

  // The channels along axis, or the tokens; checks scales and zero_points
  // hold one value for each. `operation` names the op in messages.
  Result<Blocks> blocks(const OpArgs& op, std::string_view operation) const {
    if (!axis) {
      const int64_t tokens = token_count(*input);
      ETNA_KERNEL_ASSIGN(ChannelParameters parameters, channel_parameters(op, scales, zero_points, tokens));
      return Blocks{std::max<int64_t>(1, token_width(*input)), tokens, parameters};
    }
    if (input->rank() == 0) {
      return op.input_error("input must have at least one dim for per-channel " + std::string(operation));
    }
    ETNA_KERNEL_ASSIGN(size_t d, op.wrap_dim(*axis, input->rank(), "axis"));
    const int64_t channels = input->size(d);
    ETNA_KERNEL_ASSIGN(ChannelParameters parameters, channel_parameters(op, scales, zero_points, channels));
    return Blocks{std::max<int64_t>(1, trailing_elements(*input, d)), channels, parameters};
  }
};

enum class Grouping { kPerChannel, kPerToken };

Result<GroupedArgs> grouped_args(const OpArgs& op, Grouping grouping, bool optional_zero_points = false) {
  GroupedArgs grouped;
  ETNA_KERNEL_ASSIGN(grouped.input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(grouped.scales, op.input(1, "scales"));
  ETNA_KERNEL_ASSIGN(grouped.zero_points,
                     optional_zero_points ? op.optional_input(2, "zero_points") : op.input(2, "zero_points"));
  size_t next = 3;
  if (grouping == Grouping::kPerChannel) {
    ETNA_KERNEL_ASSIGN(grouped.axis, op.int_arg(next++, "axis"));
  }
  ETNA_KERNEL_ASSIGN(grouped.range, quant_range_args(op, next));
  return grouped;
}

Status quantize_grouped(const OpArgs& op, const GroupedArgs& grouped, Tensor& out) {
  const auto [quant_min, quant_max, dtype] = grouped.range;
  ETNA_KERNEL_ASSIGN(Blocks blocks, grouped.blocks(op, "quantization"));
  ETNA_TRY(check_quantize(op, *grouped.input, out, dtype, quant_min, quant_max));
  return quantize_blocks(op, *grouped.input, out, blocks.block, blocks.channels, blocks.parameters, quant_min,
                         quant_max);
}

// quantized_decomposed::quantize_per_channel.out(Tensor input, Tensor scales, Tensor zero_points, int axis,
//   int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
Status quantize_per_channel_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(GroupedArgs grouped, grouped_args(op, Grouping::kPerChannel));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(7, "out"));
  return quantize_grouped(op, grouped, *out);
}

// quantized_decomposed::quantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min,
//   int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)
Status quantize_per_token_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(GroupedArgs grouped, grouped_args(op, Grouping::kPerToken));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(6, "out"));
  return quantize_grouped(op, grouped, *out);
}

// ---- dequantize ----

Status check_dequantize(const OpArgs& op, const Tensor& input, ScalarType dtype, std::optional<ScalarType> out_dtype,
                        const Tensor& out, int64_t quant_min, int64_t quant_max) {
  if (!is_quantized_dtype(input.dtype())) {
    return op.program_error("input must be a quantized integer tensor, got " + input.describe());
  }
  if (input.dtype() != dtype) {
    return op.program_error("input " + input.describe() + " does not have dtype " + std::string(dtype_name(dtype)));
  }
  if (!is_real_dtype(out.dtype())) return op.program_error("out must be floating point, got " + out.describe());
  if (out_dtype) ETNA_TRY(op.expect_dtype(out, "out", *out_dtype));
  if (quant_min > quant_max) {
    return op.input_error("quant_min " + std::to_string(quant_min) + " exceeds quant_max " + std::to_string(quant_max));
  }
  return Status::ok();
}

Status dequantize_blocks(const OpArgs& op, const Tensor& input, Tensor& out, int64_t block, int64_t channels,
                         const std::function<std::pair<double, double>(int64_t)>& parameters) {
  ETNA_TRY(op.prepare_output(out, Shape::of(input)));
  const int64_t n = static_cast<int64_t>(input.numel());
  for (int64_t start = 0, index = 0; start < n; start += block, ++index) {
    const auto [scale, zero_point] = parameters(channels == 0 ? 0 : index % channels);
    const float scale_f = static_cast<float>(scale);
    const int32_t zp = static_cast<int32_t>(zero_point);
    const int64_t end = std::min(n, start + block);
    for (int64_t i = start; i < end; ++i) {
      const int64_t shifted = static_cast<int64_t>(load_quantized(input.dtype(), input.data(), i)) - zp;
      store_real(out.dtype(), out.data(), i, static_cast<float>(shifted) * scale_f);
    }
  }
  return Status::ok();
}

Status dequantize_grouped(const OpArgs& op, const GroupedArgs& grouped, std::optional<ScalarType> out_dtype,
                          Tensor& out) {
  const auto [quant_min, quant_max, dtype] = grouped.range;
  ETNA_KERNEL_ASSIGN(Blocks blocks, grouped.blocks(op, "dequantization"));
  ETNA_TRY(check_dequantize(op, *grouped.input, dtype, out_dtype, out, quant_min, quant_max));
  return dequantize_blocks(op, *grouped.input, out, blocks.block, blocks.channels, blocks.parameters);
}

// Reads `ScalarType? out_dtype` when the call has it (newer exports add it
// before out); `has_out_dtype` tells where out is.
// Whether a dequantize call passes out_dtype, which older exports omit: the
// call has `count_without` arguments without it and one more with it.
Result<bool> has_out_dtype_arg(const OpArgs& op, size_t count_without) {
  if (op.count() == count_without) return false;
  ETNA_TRY(op.expect_count(count_without + 1));
  return true;
}

Result<std::optional<ScalarType>> optional_out_dtype(const OpArgs& op, size_t index, bool present) {
  if (!present) return std::optional<ScalarType>();
  return op.optional_dtype_arg(index, "out_dtype");
}

// quantized_decomposed::dequantize_per_tensor.out(Tensor input, float scale, int zero_point, int quant_min,
//   int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)
// (out_dtype is absent in older exports.)
Status dequantize_per_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(const bool has_out_dtype, has_out_dtype_arg(op, 8));
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(double scale, op.double_arg(1, "scale"));
  ETNA_KERNEL_ASSIGN(int64_t zero_point, op.int_arg(2, "zero_point"));
  ETNA_KERNEL_ASSIGN(QuantRange range, quant_range_args(op, 3));
  const auto [quant_min, quant_max, dtype] = range;
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> out_dtype, optional_out_dtype(op, 6, has_out_dtype));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(has_out_dtype ? 7 : 6, "out"));
  ETNA_TRY(check_dequantize(op, *input, dtype, out_dtype, *out, quant_min, quant_max));
  return dequantize_blocks(op, *input, *out, std::max<int64_t>(1, static_cast<int64_t>(input->numel())), 1,
                           [&](int64_t) { return std::pair<double, double>(scale, static_cast<double>(zero_point)); });
}

// quantized_decomposed::dequantize_per_tensor.Tensor_out(Tensor input, Tensor scale, Tensor zero_point,
//   int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)
Status dequantize_per_tensor_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(const bool has_out_dtype, has_out_dtype_arg(op, 8));
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(auto parameters, scalar_parameters(op, 1, 2));
  ETNA_KERNEL_ASSIGN(QuantRange range, quant_range_args(op, 3));
  const auto [quant_min, quant_max, dtype] = range;
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> out_dtype, optional_out_dtype(op, 6, has_out_dtype));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(has_out_dtype ? 7 : 6, "out"));
  ETNA_TRY(check_dequantize(op, *input, dtype, out_dtype, *out, quant_min, quant_max));
  return dequantize_blocks(
      op, *input, *out, std::max<int64_t>(1, static_cast<int64_t>(input->numel())), 1,
      [&](int64_t) { return std::pair<double, double>(parameters.first, static_cast<double>(parameters.second)); });
}

// quantized_decomposed::dequantize_per_channel.out(Tensor input, Tensor scales, Tensor? zero_points, int axis,
//   int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)
Status dequantize_per_channel_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(const bool has_out_dtype, has_out_dtype_arg(op, 9));
  ETNA_KERNEL_ASSIGN(GroupedArgs grouped, grouped_args(op, Grouping::kPerChannel, true));
  ETNA_KERNEL_ASSIGN(std::optional<ScalarType> out_dtype, optional_out_dtype(op, 7, has_out_dtype));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(has_out_dtype ? 8 : 7, "out"));
  return dequantize_grouped(op, grouped, out_dtype, *out);
}

// quantized_decomposed::dequantize_per_token.out(Tensor input, Tensor scales, Tensor zero_points, int quant_min,
//   int quant_max, ScalarType dtype, ScalarType output_dtype, *, Tensor(a!) out) -> Tensor(a!)
Status dequantize_per_token_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(GroupedArgs grouped, grouped_args(op, Grouping::kPerToken));
  ETNA_KERNEL_ASSIGN(ScalarType output_dtype, dtype_arg(op, 6, "output_dtype"));
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(7, "out"));
  return dequantize_grouped(op, grouped, output_dtype, *out);
}

// ---- choosing parameters ----

// ExecuTorch's asymmetric rule: the range widened to include 0, a scale that
// spans it (0.1 when degenerate, at least 6.1e-5), and the zero point from
// whichever end loses less, nudged into [qmin, qmax].
std::pair<double, int64_t> choose_scale_and_zero_point(float min, float max, int32_t qmin, int32_t qmax) {
  min = std::min(min, 0.0f);
  max = std::max(max, 0.0f);
  double scale = (static_cast<double>(max) - min) / (qmax - qmin);
  if (static_cast<float>(scale) == 0.0f || std::isinf(1.0f / static_cast<float>(scale))) scale = 0.1;
  constexpr float kSmallScale = 6.1e-5f;
  if (scale < kSmallScale) {
    const float original = static_cast<float>(scale);
    scale = kSmallScale;
    if (min == 0.0f) {
      max = kSmallScale * static_cast<float>(qmax - qmin);
    } else if (max == 0.0f) {
      min = -kSmallScale * static_cast<float>(qmax - qmin);
    } else {
      const float amplifier = kSmallScale / original;
      min *= amplifier;
      max *= amplifier;
    }
  }
  const double from_min = qmin - min / scale;
  const double from_max = qmax - max / scale;
  const double error_min = std::abs(qmin) - std::abs(min / scale);
  const double error_max = std::abs(qmax) - std::abs(max / scale);
  const double initial = error_min < error_max ? from_min : from_max;
  int64_t zero_point;
  if (initial < qmin) {
    zero_point = qmin;
  } else if (initial > qmax) {
    zero_point = qmax;
  } else {
    // A NaN (a row holding NaN or infinity) becomes 0 rather than an undefined cast.
    zero_point = convert_value<int64_t>(std::nearbyint(static_cast<float>(initial)));
  }
  return {scale, zero_point};
}

// float32 input, or float16 / bfloat16 widened to float32 (exact) first.
// ExecuTorch's portable kernels take float32 only; export_llama's 16-bit
// graphs with --quantize_kv_cache pass the 16-bit keys, values and queries.
Status check_choose(const OpArgs& op, const Tensor& input, const Tensor& scale_out, const Tensor& zero_point_out) {
  if (input.dtype() != ScalarType::kFloat && input.dtype() != ScalarType::kHalf &&
      input.dtype() != ScalarType::kBFloat16) {
    return op.program_error("input must be float32, float16 or bfloat16, got " + input.describe());
  }
  if (!is_parameter_dtype(scale_out.dtype()) || !is_parameter_dtype(zero_point_out.dtype())) {
    return op.program_error("scale_out " + scale_out.describe() + " and zero_point_out " + zero_point_out.describe() +
                            " must be float or integer tensors");
  }
  if (input.numel() == 0) return op.input_error("input " + input.describe() + " is empty: no range to quantize");
  return Status::ok();
}

// Chooses parameters for `groups` consecutive runs of `width` elements; a
// 16-bit run is widened into `widened` (width floats) first, so every dtype
// takes the float32 path's minimum, maximum and rounding.
void choose_groups(const Tensor& input, int64_t groups, int64_t width, int32_t qmin, int32_t qmax, Tensor& scale_out,
                   Tensor& zero_point_out, float* widened) {
  const bool wide = input.dtype() == ScalarType::kFloat;
  for (int64_t g = 0; g < groups; ++g) {
    const float* run = wide ? input.data_as<const float>() + g * width : widened;
    if (!wide) {
      for (int64_t i = 0; i < width; ++i) widened[i] = load_real(input.dtype(), input.data(), g * width + i);
    }
    const auto [lo, hi] = std::minmax_element(run, run + width);
    const auto [scale, zero_point] = choose_scale_and_zero_point(*lo, *hi, qmin, qmax);
    store_parameter(scale_out, g, scale);
    store_parameter(zero_point_out, g, static_cast<double>(zero_point));
  }
}

Result<std::vector<Tensor*>> out_pair(const OpArgs& op, size_t first) {
  ETNA_KERNEL_ASSIGN(Tensor * scale_out, op.output(first, "scale_out"));
  ETNA_KERNEL_ASSIGN(Tensor * zero_point_out, op.output(first + 1, "zero_point_out"));
  return std::vector<Tensor*>{scale_out, zero_point_out};
}

// quantized_decomposed::choose_qparams.Tensor_out(Tensor input, int quant_min, int quant_max, float eps,
//   ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))
Status choose_qparams_tensor_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(int64_t quant_min, op.int_arg(1, "quant_min"));
  ETNA_KERNEL_ASSIGN(int64_t quant_max, op.int_arg(2, "quant_max"));
  ETNA_KERNEL_ASSIGN(double eps, op.double_arg(3, "eps"));
  ETNA_KERNEL_ASSIGN(ScalarType dtype, dtype_arg(op, 4, "dtype"));
  ETNA_KERNEL_ASSIGN(auto outs, out_pair(op, 5));
  (void)eps;    // unused by ExecuTorch's kernel
  (void)dtype;  // the range comes from quant_min/quant_max
  if (quant_min >= quant_max || quant_min < std::numeric_limits<int32_t>::min() ||
      quant_max > std::numeric_limits<int32_t>::max()) {
    return op.input_error("quant range [" + std::to_string(quant_min) + ", " + std::to_string(quant_max) +
                          "] is empty or not 32-bit");
  }
  ETNA_TRY(check_choose(op, *input, *outs[0], *outs[1]));
  ETNA_KERNEL_ASSIGN(auto widened, widening_row(input->dtype(), static_cast<int64_t>(input->numel())));
  Shape one;
  one.rank = 1;
  one[0] = 1;
  ETNA_TRY(op.prepare_output(*outs[0], one, "scale_out"));
  ETNA_TRY(op.prepare_output(*outs[1], one, "zero_point_out"));
  choose_groups(*input, 1, static_cast<int64_t>(input->numel()), static_cast<int32_t>(quant_min),
                static_cast<int32_t>(quant_max), *outs[0], *outs[1], widened.get());
  return Status::ok();
}

// quantized_decomposed::choose_qparams_per_token_asymmetric.out(Tensor input, ScalarType dtype, *,
//   Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))
// The range is always int8's, whatever dtype says (as in ExecuTorch).
Status choose_qparams_per_token_asymmetric_out(KernelArgs args) {
  OpArgs op(args);
  ETNA_KERNEL_ASSIGN(Tensor * input, op.input(0, "input"));
  ETNA_KERNEL_ASSIGN(ScalarType dtype, dtype_arg(op, 1, "dtype"));
  ETNA_KERNEL_ASSIGN(auto outs, out_pair(op, 2));
  (void)dtype;
  if (input->rank() == 0) return op.input_error("input must have at least one dim (tokens are rows of the last)");
  ETNA_TRY(check_choose(op, *input, *outs[0], *outs[1]));
  ETNA_KERNEL_ASSIGN(auto widened, widening_row(input->dtype(), token_width(*input)));
  Shape per_token = Shape::of(*input);
  per_token[per_token.rank - 1] = 1;
  ETNA_TRY(op.prepare_output(*outs[0], per_token, "scale_out"));
  ETNA_TRY(op.prepare_output(*outs[1], per_token, "zero_point_out"));
  choose_groups(*input, token_count(*input), token_width(*input), -128, 127, *outs[0], *outs[1], widened.get());
  return Status::ok();
}

// ---- embeddings ----

// Element j of a row of packed `bits`-bit weights (8: the byte itself, signed
// or not per `weight`'s dtype).
int32_t packed_weight(const uint8_t* row, int64_t j, int bits, bool is_signed) {
  switch (bits) {
    case 4: {
      const uint8_t byte = row[j >> 1];
      return ((j & 1) ? (byte & 0x0F) : (byte >> 4)) - 8;
    }
    case 2: {
      const uint8_t byte = row[j >> 2];
      return ((byte >> (2 * (j & 3))) & 0x03) - 2;
    }
    default: return is_signed ? static_cast<int8_t>(row[j]) : row[j];
  }
}

Status quantized_embedding(const OpArgs& op, int bits, bool has_dtype) {
  ETNA_KERNEL_ASSIGN(Tensor * weight, op.input(0, "weight"));
  ETNA_KERNEL_ASSIGN(Tensor * scales, op.input(1, "weight_scales"));
  ETNA_KERNEL_ASSIGN(Tensor * zero_points, op.optional_input(2, "weight_zero_points"));
  ETNA_KERNEL_ASSIGN(int64_t quant_min, op.int_arg(3, "weight_quant_min"));
  ETNA_KERNEL_ASSIGN(int64_t quant_max, op.int_arg(4, "weight_quant_max"));
  ETNA_KERNEL_ASSIGN(Tensor * indices, op.input(5, "indices"));
  std::optional<ScalarType> out_dtype;
  if (has_dtype) {
    ETNA_KERNEL_ASSIGN(out_dtype, op.optional_dtype_arg(6, "dtype"));
  }
  ETNA_KERNEL_ASSIGN(Tensor * out, op.output(has_dtype ? 7 : 6, "out"));

  const bool byte_weights = bits == 8;
  if (weight->rank() != 2) return op.input_error("weight must be 2-D, got " + weight->describe());
  if (weight->dtype() != ScalarType::kByte && !(byte_weights && weight->dtype() == ScalarType::kChar)) {
    return op.program_error("weight must be uint8" + std::string(byte_weights ? " or int8" : "") + ", got " +
                            weight->describe());
  }
  const int64_t rows = weight->size(0);
  const int64_t width = weight->size(1) * (8 / bits);
  if (!is_real_dtype(scales->dtype()))
    return op.program_error("weight_scales must be floating point, got " + scales->describe());
  if ((scales->rank() != 1 && scales->rank() != 2) || scales->size(0) != rows) {
    return op.input_error("weight_scales " + scales->describe() + " must be [" + std::to_string(rows) + "] or [" +
                          std::to_string(rows) + ", groups]");
  }
  const int64_t groups = scales->rank() == 2 ? scales->size(1) : 1;
  if (groups <= 0 || width % groups != 0) {
    return op.input_error(std::to_string(groups) + " groups do not divide the embedding width " +
                          std::to_string(width));
  }
  if (zero_points != nullptr) {
    ETNA_TRY(expect_parameters(op, *zero_points, "weight_zero_points", rows * groups));
    if (zero_points->rank() != scales->rank()) {
      return op.input_error("weight_zero_points " + zero_points->describe() + " must have the rank of weight_scales " +
                            scales->describe());
    }
  }
  if (quant_min > quant_max) {
    return op.input_error("weight_quant_min " + std::to_string(quant_min) + " exceeds weight_quant_max " +
                          std::to_string(quant_max));
  }
  if (indices->dtype() != ScalarType::kLong && indices->dtype() != ScalarType::kInt) {
    return op.program_error("indices must be int64 or int32, got " + indices->describe());
  }
  if (!is_real_dtype(out->dtype())) return op.program_error("out must be floating point, got " + out->describe());
  if (out_dtype) ETNA_TRY(op.expect_dtype(*out, "out", *out_dtype));
  if (indices->rank() + 1 > kMaxTensorRank)
    return op.input_error("indices " + indices->describe() + " has too many dims");
  const int64_t count = static_cast<int64_t>(indices->numel());
  auto index_at = [&](int64_t i) -> int64_t {
    return indices->dtype() == ScalarType::kLong ? indices->data_as<const int64_t>()[i]
                                                 : indices->data_as<const int32_t>()[i];
  };
  for (int64_t i = 0; i < count; ++i) {
    if (index_at(i) < 0 || index_at(i) >= rows) {
      return op.input_error("index " + std::to_string(index_at(i)) + " is out of range for " + std::to_string(rows) +
                            " embeddings");
    }
  }
  Shape shape = Shape::of(*indices);
  shape.rank = indices->rank() + 1;
  shape[indices->rank()] = width;
  ETNA_TRY(op.prepare_output(*out, shape));

  const int64_t group_size = width / groups;
  const bool is_signed = weight->dtype() == ScalarType::kChar;
  const auto* weights = static_cast<const uint8_t*>(weight->data());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = index_at(i);
    const uint8_t* packed = weights + row * weight->size(1);
    for (int64_t j = 0; j < width; ++j) {
      const int64_t parameter = row * groups + j / group_size;
      const float scale = load_real(scales->dtype(), scales->data(), parameter);
      const float zero_point = zero_points ? static_cast<float>(load_parameter(*zero_points, parameter)) : 0.0f;
      const float value = (static_cast<float>(packed_weight(packed, j, bits, is_signed)) - zero_point) * scale;
      store_real(out->dtype(), out->data(), i * width + j, value);
    }
  }
  return Status::ok();
}

// quantized_decomposed::embedding_{byte,4bit,2bit}.out(Tensor weight, Tensor weight_scales,
//   Tensor? weight_zero_points, int weight_quant_min, int weight_quant_max, Tensor indices, *,
//   Tensor(a!) out) -> Tensor(a!)
// and .dtype_out(..., Tensor indices, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)
template <int kBits, bool kHasDtype>
Status embedding_kernel(KernelArgs args) {
  return quantized_embedding(OpArgs(args), kBits, kHasDtype);
}

}  // namespace

void register_quantized_kernels(KernelRegistry& registry) {
  registry.add({"quantized_decomposed::quantize_per_tensor.out", 8, quantize_per_tensor_out});
  registry.add({"quantized_decomposed::quantize_per_tensor.Tensor_out", 8, quantize_per_tensor_tensor_out});
  registry.add({"quantized_decomposed::quantize_per_channel.out", 9, quantize_per_channel_out});
  registry.add({"quantized_decomposed::quantize_per_token.out", 8, quantize_per_token_out});
  registry.add({"quantized_decomposed::dequantize_per_tensor.out", -1, dequantize_per_tensor_out});
  registry.add({"quantized_decomposed::dequantize_per_tensor.Tensor_out", -1, dequantize_per_tensor_tensor_out});
  registry.add({"quantized_decomposed::dequantize_per_channel.out", -1, dequantize_per_channel_out});
  registry.add({"quantized_decomposed::dequantize_per_token.out", 9, dequantize_per_token_out});
  registry.add({"quantized_decomposed::choose_qparams.Tensor_out", 8, choose_qparams_tensor_out});
  registry.add(
      {"quantized_decomposed::choose_qparams_per_token_asymmetric.out", 5, choose_qparams_per_token_asymmetric_out});
  registry.add({"quantized_decomposed::embedding_byte.out", 8, embedding_kernel<8, false>});
  registry.add({"quantized_decomposed::embedding_byte.dtype_out", 9, embedding_kernel<8, true>});
  registry.add({"quantized_decomposed::embedding_4bit.out", 8, embedding_kernel<4, false>});
  registry.add({"quantized_decomposed::embedding_4bit.dtype_out", 9, embedding_kernel<4, true>});
  registry.add({"quantized_decomposed::embedding_2bit.out", 8, embedding_kernel<2, false>});
  registry.add({"quantized_decomposed::embedding_2bit.dtype_out", 9, embedding_kernel<2, true>});
}

}  // namespace etna::kernels
