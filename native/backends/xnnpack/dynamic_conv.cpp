#include "backends/xnnpack/dynamic_conv.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/xnnpack/parallel.h"

namespace etna::xnn {
namespace {

// Output pixels gathered and multiplied at once: bounds the im2col buffer.
constexpr size_t kTilePixels = 256;
// DynamicLinear reads a row in whole 64-byte chunks: the bytes past the last
// row must be readable (they meet zero weights).
constexpr size_t kReadSlack = 64;

Shape matrix_shape(size_t rows, size_t columns) {
  Shape shape;
  shape.rank = 2;
  shape.dims[0] = rows;
  shape.dims[1] = columns;
  return shape;
}

// Output size along one axis, as XNNPACK computes it for explicit padding.
size_t output_size(size_t input, size_t pad_a, size_t pad_b, size_t kernel, size_t dilation, size_t stride) {
  const size_t padded = input + pad_a + pad_b;
  const size_t field = (kernel - 1) * dilation + 1;
  return padded < field ? 0 : (padded - field) / stride + 1;
}

// Codes one output of a group sums over: its receptive field (kh, kw, in/groups).
size_t field_length(const Node& node) {
  return size_t{node.kernel_height} * node.kernel_width * node.group_input_channels;
}

}  // namespace

Result<std::unique_ptr<DynamicConv>> DynamicConv::create(const Graph& graph, const Node& node, pthreadpool_t pool) {
  const Value& filter = graph.values[node.inputs[1]];
  const Value* bias = node.inputs[2] == kNoValue ? nullptr : &graph.values[node.inputs[2]];
  std::unique_ptr<DynamicConv> conv(new DynamicConv());
  const size_t field = field_length(node), out_per_group = node.group_output_channels;
  const size_t out_channels = size_t{node.groups} * out_per_group;
  if (filter.constant.size < out_channels * field || filter.quant.channel_scales.size() != out_channels ||
      (bias && bias->constant.size && bias->constant.size < out_channels * sizeof(float))) {
    return make_error(ErrorCode::kInternal, node.describe() + ": filter or bias bytes missing at packing");
  }

  // Group g's filter rows [g * out_per_group, (g + 1) * out_per_group) are a
  // fully connected layer over the group's field (kh, kw, in), as im2col lays it out.
  for (size_t g = 0; g < node.groups; ++g) {
    Graph layer;
    layer.values.resize(3);
    Value& weights = layer.values[1];
    weights.datatype = Datatype::qcint8;
    weights.shape = matrix_shape(out_per_group, field);
    weights.quant.kind = Quantization::Kind::kPerChannel;
    const float* first_scale = filter.quant.channel_scales.begin() + g * out_per_group;
    weights.quant.channel_scales = ScaleList(std::vector<float>(first_scale, first_scale + out_per_group));
    weights.is_constant = true;
    weights.constant = ByteSpan{filter.constant.data + g * out_per_group * field, out_per_group * field};
    Node fully_connected;
    fully_connected.type = NodeType::kFullyConnected;
    fully_connected.output_min = node.output_min;
    fully_connected.output_max = node.output_max;
    fully_connected.inputs = {0, 1, kNoValue};
    fully_connected.outputs = {0};
    if (bias && bias->constant.size) {
      Value& group_bias = layer.values[2];
      group_bias.datatype = Datatype::fp32;
      group_bias.is_constant = true;
      const size_t bytes = out_per_group * sizeof(float);
      group_bias.constant = ByteSpan{bias->constant.data + g * bytes, bytes};
      fully_connected.inputs[2] = 2;
    }
    auto linear = DynamicLinear::create(layer, fully_connected, pool);
    if (!linear) return linear.error();
    conv->group_layers_.push_back(std::move(*linear));
  }
  return conv;
}

size_t DynamicConv::packed_bytes() const {
  size_t bytes = 0;
  for (const auto& layer : group_layers_) bytes += layer->packed_bytes();
  return bytes;
}

Status DynamicConv::run(const Node& node, const Shape& input_shape, const void* input, float* output,
                        pthreadpool_t threadpool) const {
  const size_t groups = node.groups, group_in = node.group_input_channels, group_out = node.group_output_channels;
  const size_t in_channels = groups * group_in;
  if (input_shape.rank != 4 || input_shape.dims[3] != in_channels) {
    return make_error(ErrorCode::kInvalidInput, node.describe() + ": input " + input_shape.to_string() +
                                                    " is not NHWC with " + std::to_string(in_channels) + " channels");
  }
  const size_t images = input_shape.dims[0], height = input_shape.dims[1], width = input_shape.dims[2];
  const size_t out_height = output_size(height, node.padding_top, node.padding_bottom, node.kernel_height,
                                        node.dilation_height, node.stride_height);
  const size_t out_width = output_size(width, node.padding_left, node.padding_right, node.kernel_width,
                                       node.dilation_width, node.stride_width);
  const size_t pixels = out_height * out_width;
  const size_t out_channels = groups * group_out;
  if (pixels == 0 || images == 0) return Status::ok();

  const uint8_t* data = static_cast<const uint8_t*>(input);
  const auto* image_params = reinterpret_cast<const DynamicRowParams*>(data + dynamic_params_offset(input_shape));
  const size_t field = field_length(node);
  // Pixel tiles of equal size (whole register tiles of 4 rows where they can
  // be), each image's pixels cut alike: the units of work.
  const size_t tile_capacity = std::min(pixels, block_size(pixels, divide_up(pixels, kTilePixels), 4));
  const size_t tiles_per_image = divide_up(pixels, tile_capacity);
  const size_t units = images * tiles_per_image;
  // Tasks take runs of whole units when there are enough for every thread;
  // otherwise the units run in turn and each product splits its channels.
  const size_t work = images * pixels * out_channels * field;
  size_t tasks = std::min(units, task_count(threadpool, work, kMinTaskIntegerMacs));
  if (units < pool_threads(threadpool)) tasks = 1;
  const size_t units_per_task = block_size(units, tasks, 1);
  tasks = divide_up(units, units_per_task);
  pthreadpool_t product_pool = tasks > 1 ? nullptr : threadpool;

  // Per task: one tile of gathered fields as a qdint8 [pixels, field]
  // buffer (codes, then every row's parameters: the image's), and the
  // product of one group when there are several.
  const size_t columns_bytes =
      divide_up(value_bytes(Datatype::qdint8, matrix_shape(tile_capacity, field)) + kReadSlack, 64) * 64;
  const size_t group_output_floats = groups > 1 ? tile_capacity * group_out : 0;
  std::vector<uint8_t> columns_of_tasks(tasks * columns_bytes);
  std::vector<float> group_output_of_tasks(tasks * group_output_floats);
  std::vector<Status> failures(tasks, Status::ok());

  parallel_for(pool_for(threadpool, tasks), tasks, [&](size_t task) {
    uint8_t* columns = columns_of_tasks.data() + task * columns_bytes;
    float* group_output = group_output_of_tasks.data() + task * group_output_floats;
    const size_t end = std::min(units, (task + 1) * units_per_task);
    for (size_t unit = task * units_per_task; unit < end; ++unit) {
      const size_t n = unit / tiles_per_image;
      const size_t first = unit % tiles_per_image * tile_capacity;
      DynamicRowParams params;
      std::memcpy(&params, image_params + n, sizeof params);
      // The stored code of 0.0 (zero points are kept as uint8, graph.h).
      const auto zero_code = static_cast<uint8_t>(params.zero_point);
      const uint8_t* image = data + n * height * width * in_channels;
      float* image_output = output + n * pixels * out_channels;
      const size_t count = std::min(tile_capacity, pixels - first);
      const Shape tile = matrix_shape(count, field);
      uint8_t* row_params = columns + dynamic_params_offset(tile);
      for (size_t r = 0; r < count; ++r) std::memcpy(row_params + r * sizeof params, &params, sizeof params);
      for (size_t g = 0; g < groups; ++g) {
        for (size_t r = 0; r < count; ++r) {
          const size_t oy = (first + r) / out_width, ox = (first + r) % out_width;
          uint8_t* row = columns + r * field;
          for (size_t ky = 0; ky < node.kernel_height; ++ky) {
            // Unsigned wrap-around makes rows above the image fail `iy < height`.
            const size_t iy = oy * node.stride_height + ky * node.dilation_height - node.padding_top;
            for (size_t kx = 0; kx < node.kernel_width; ++kx) {
              const size_t ix = ox * node.stride_width + kx * node.dilation_width - node.padding_left;
              uint8_t* cell = row + (ky * node.kernel_width + kx) * group_in;
              if (iy < height && ix < width) {
                std::memcpy(cell, image + (iy * width + ix) * in_channels + g * group_in, group_in);
              } else {
                std::memset(cell, zero_code, group_in);
              }
            }
          }
        }
        float* tile_output = groups > 1 ? group_output : image_output + first * out_channels;
        Status ran = group_layers_[g]->run(node, tile, columns, tile_output, product_pool);
        if (!ran) {
          failures[task] = std::move(ran);
          return;
        }
        if (groups > 1) {
          for (size_t r = 0; r < count; ++r) {
            std::memcpy(image_output + (first + r) * out_channels + g * group_out, group_output + r * group_out,
                        group_out * sizeof(float));
          }
        }
      }
    }
  });
  for (Status& failure : failures) {
    if (!failure) return failure;
  }
  return Status::ok();
}

}  // namespace etna::xnn
