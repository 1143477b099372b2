#include "backends/xnnpack/patch_deconvolution.h"

#include <algorithm>
#include <cstring>

#include "backends/xnnpack/matmul_kernels.h"
#include "backends/xnnpack/output_bounds.h"
#include "backends/xnnpack/parallel.h"

namespace etna::xnn {
namespace {

// Patch rows narrower than one AVX2 register of floats run by pixel.
constexpr size_t kNarrowRow = 8;

std::vector<float> floats_of(ByteSpan bytes) {
  std::vector<float> values(bytes.size / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data, values.size() * sizeof(float));
  return values;
}

}  // namespace

bool PatchDeconvolution::handles(const Graph& graph, const Node& node) {
  if (node.type != NodeType::kConvTranspose2d || node.groups != 1) return false;
  if (node.kernel_height != node.stride_height || node.kernel_width != node.stride_width) return false;
  if (node.dilation_height != 1 || node.dilation_width != 1) return false;
  if (node.adjustment_height != 0 || node.adjustment_width != 0 || node.flags != 0) return false;
  if (node.padding_top || node.padding_right || node.padding_bottom || node.padding_left) return false;
  const auto fp32 = [&](uint32_t index) { return graph.values[index].datatype == Datatype::fp32; };
  return fp32(node.inputs[0]) && fp32(node.inputs[1]) && fp32(node.outputs[0]) &&
         (node.inputs[2] == kNoValue || fp32(node.inputs[2]));
}

Result<std::unique_ptr<PatchDeconvolution>> PatchDeconvolution::create(const Graph& graph, const Node& node) {
  if (!handles(graph, node)) return make_error(ErrorCode::kInternal, node.describe() + " is not a patch deconvolution");
  std::unique_ptr<PatchDeconvolution> op(new PatchDeconvolution());
  op->kernel_h_ = node.kernel_height;
  op->kernel_w_ = node.kernel_width;
  op->in_channels_ = node.group_input_channels;
  op->out_channels_ = node.group_output_channels;
  op->output_min_ = node.output_min;
  op->output_max_ = node.output_max;
  const size_t kh = op->kernel_h_, kw = op->kernel_w_, cin = op->in_channels_, cout = op->out_channels_;

  // The filter is [out channel][ky][kx][in channel] (checked by infer_shapes).
  const std::vector<float> filter = floats_of(graph.values[node.inputs[1]].constant);
  if (filter.size() != cout * kh * kw * cin) {
    return make_error(ErrorCode::kInvalidProgram, node.describe() + ": filter holds " + std::to_string(filter.size()) +
                                                      " values, expected " + std::to_string(cout * kh * kw * cin));
  }
  auto weight = [&](size_t ky, size_t kx, size_t co, size_t ci) {
    return filter[((co * kh + ky) * kw + kx) * cin + ci];
  };
  if (op->row_columns() < kNarrowRow) {
    op->by_pixel_.resize(op->patch_columns() * cin);
    float* row = op->by_pixel_.data();
    for (size_t ky = 0; ky < kh; ++ky)
      for (size_t kx = 0; kx < kw; ++kx)
        for (size_t co = 0; co < cout; ++co, row += cin)
          for (size_t ci = 0; ci < cin; ++ci) row[ci] = weight(ky, kx, co, ci);
  } else {
    op->by_row_.resize(op->patch_columns() * cin);
    float* column = op->by_row_.data();
    for (size_t ky = 0; ky < kh; ++ky)
      for (size_t ci = 0; ci < cin; ++ci)
        for (size_t kx = 0; kx < kw; ++kx)
          for (size_t co = 0; co < cout; ++co) *column++ = weight(ky, kx, co, ci);
  }
  op->bias_.assign(cout, 0.0f);
  if (node.inputs[2] != kNoValue) {
    const std::vector<float> bias = floats_of(graph.values[node.inputs[2]].constant);
    if (bias.size() != cout) {
      return make_error(ErrorCode::kInvalidProgram, node.describe() + ": bias holds " + std::to_string(bias.size()) +
                                                        " values, expected " + std::to_string(cout));
    }
    op->bias_ = bias;
  }
  return op;
}

void PatchDeconvolution::run(const Shape& input_shape, const float* input, float* output,
                             pthreadpool_t threadpool) const {
  const size_t rows = input_shape.dims[0] * input_shape.dims[1];
  const size_t width = input_shape.dims[2];
  if (rows == 0 || width == 0) return;
  // Input rows write disjoint output rows: tasks take runs of whole rows.
  const size_t work = rows * width * in_channels_ * patch_columns();
  const size_t tasks = std::min(rows, task_count(threadpool, work, kMinTaskFloatMacs));
  const size_t rows_per_task = block_size(rows, tasks, 1);
  const size_t runs = divide_up(rows, rows_per_task);
  // By pixel, each run multiplies into products of its own.
  std::vector<float> products(by_pixel() ? runs * patch_columns() * width : 0);
  parallel_for(pool_for(threadpool, runs), runs, [&](size_t task) {
    const size_t first = task * rows_per_task, end = std::min(rows, first + rows_per_task);
    if (by_pixel()) {
      run_by_pixel(first, end, width, input, output, products.data() + task * patch_columns() * width);
    } else {
      run_by_row(first, end, width, input, output);
    }
  });
}

// Input row r makes output rows r * kernel_h + ky (batch and height fold
// together, as the output height is the input's times kernel_h); each of
// them is [width][kernel_w * out_channels], one product.
void PatchDeconvolution::run_by_row(size_t first, size_t end, size_t width, const float* input, float* output) const {
  const size_t columns = row_columns();
  const size_t out_row = width * columns;
  const size_t cin = in_channels_, cout = out_channels_;
  const float* bias = bias_.data();
  const float low = output_min_, high = output_max_;
  for (size_t r = first; r < end; ++r) {
    const float* in_row = input + r * width * cin;
    for (size_t ky = 0; ky < kernel_h_; ++ky) {
      float* __restrict target = output + (r * kernel_h_ + ky) * out_row;
      matmul_f32(in_row, by_row_.data() + ky * cin * columns, target, width, cin, columns, false);
      for (size_t i = 0; i < out_row; i += cout) {
        for (size_t co = 0; co < cout; ++co) target[i + co] = clamp_keeping_nan(target[i + co] + bias[co], low, high);
      }
    }
  }
}

// [patch column][in channel] times the row of pixels read as a transposed
// operand ([width][in channel] is [n][k]), then each patch column spread over
// the output rows it belongs to.
void PatchDeconvolution::run_by_pixel(size_t first, size_t end, size_t width, const float* input, float* output,
                                      float* products) const {
  const size_t cin = in_channels_, cout = out_channels_, kw = kernel_w_;
  const size_t patch_row = kw * cout;  // products per ky
  const float* __restrict sums = products;
  const float* bias = bias_.data();
  const float low = output_min_, high = output_max_;
  const size_t out_row = width * patch_row;
  for (size_t r = first; r < end; ++r) {
    matmul_f32(by_pixel_.data(), input + r * width * cin, products, patch_columns(), cin, width, true);
    for (size_t ky = 0; ky < kernel_h_; ++ky) {
      float* __restrict target = output + (r * kernel_h_ + ky) * out_row;
      for (size_t j = 0; j < patch_row; ++j) {  // j = kx * out_channels + co
        const float* __restrict column = sums + (ky * patch_row + j) * width;
        const float b = bias[j % cout];
        for (size_t x = 0; x < width; ++x) target[x * patch_row + j] = clamp_keeping_nan(column[x] + b, low, high);
      }
    }
  }
}

}  // namespace etna::xnn
