#include "backends/xnnpack/dynamic_conv.h"

#include <algorithm>
#include <cstring>
#include <string>

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

Result<std::unique_ptr<DynamicConv>> DynamicConv::create(const Graph& graph, const Node& node) {
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
    const auto first_scale = filter.quant.channel_scales.begin() + static_cast<std::ptrdiff_t>(g * out_per_group);
    weights.quant.channel_scales.assign(first_scale, first_scale + static_cast<std::ptrdiff_t>(out_per_group));
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
    auto linear = DynamicLinear::create(layer, fully_connected);
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

Status DynamicConv::run(const Node& node, const Shape& input_shape, const void* input, float* output) const {
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
  const size_t tile_capacity = std::min(kTilePixels, pixels);
  // One tile of gathered fields as a qdint8 [pixels, field] buffer: codes,
  // then every row's parameters (the image's).
  std::vector<uint8_t> columns(value_bytes(Datatype::qdint8, matrix_shape(tile_capacity, field)) + kReadSlack);
  std::vector<float> group_output(groups > 1 ? tile_capacity * group_out : 0);

  for (size_t n = 0; n < images; ++n) {
    DynamicRowParams params;
    std::memcpy(&params, image_params + n, sizeof params);
    // The stored code of 0.0 (zero points are kept as uint8, graph.h).
    const auto zero_code = static_cast<uint8_t>(params.zero_point);
    const uint8_t* image = data + n * height * width * in_channels;
    float* image_output = output + n * pixels * out_channels;
    for (size_t first = 0; first < pixels; first += tile_capacity) {
      const size_t count = std::min(tile_capacity, pixels - first);
      const Shape tile = matrix_shape(count, field);
      uint8_t* row_params = columns.data() + dynamic_params_offset(tile);
      for (size_t r = 0; r < count; ++r) std::memcpy(row_params + r * sizeof params, &params, sizeof params);
      for (size_t g = 0; g < groups; ++g) {
        for (size_t r = 0; r < count; ++r) {
          const size_t oy = (first + r) / out_width, ox = (first + r) % out_width;
          uint8_t* row = columns.data() + r * field;
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
        float* tile_output = groups > 1 ? group_output.data() : image_output + first * out_channels;
        ETNA_TRY(group_layers_[g]->run(node, tile, columns.data(), tile_output));
        if (groups > 1) {
          for (size_t r = 0; r < count; ++r) {
            std::memcpy(image_output + (first + r) * out_channels + g * group_out, group_output.data() + r * group_out,
                        group_out * sizeof(float));
          }
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace etna::xnn
