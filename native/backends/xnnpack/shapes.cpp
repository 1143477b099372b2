#include "backends/xnnpack/shapes.h"

#include <algorithm>
#include <cstdint>

#include "backends/xnnpack/node_types.h"

namespace etna::xnn {
namespace {

constexpr uint64_t kMaxElements = uint64_t{1} << 44;

Error shape_error(const Node& node, const std::string& what) {
  return make_error(ErrorCode::kInvalidInput, node.describe() + ": " + what);
}

Shape make_shape(std::initializer_list<size_t> dims) {
  Shape shape;
  for (size_t d : dims) shape.dims[shape.rank++] = d;
  return shape;
}

class ShapeRules {
 public:
  explicit ShapeRules(ShapeCall& call)
      : graph_(call.graph), node_(call.node), shapes_(call.shapes), at_declared_(call.at_declared) {}

  const Shape& in(size_t i) const { return shapes_[node_.inputs[i]]; }
  bool has_input(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] != kNoValue; }
  const Shape& declared_out(size_t i) const { return graph_.values[node_.outputs[i]].shape; }

  Status set_out(size_t i, const Shape& shape) {
    uint64_t elements = 1;
    for (size_t d = 0; d < shape.rank; ++d) {
      if (__builtin_mul_overflow(elements, uint64_t{shape.dims[d]}, &elements) || elements > kMaxElements) {
        return shape_error(node_, "output shape " + shape.to_string() + " is too large");
      }
    }
    shapes_[node_.outputs[i]] = shape;
    return Status::ok();
  }

  Status rank_is(const Shape& shape, size_t rank, const char* role) const {
    if (shape.rank != rank) {
      return shape_error(
          node_, std::string(role) + " has shape " + shape.to_string() + ", expected rank " + std::to_string(rank));
    }
    return Status::ok();
  }

  Status positive(uint32_t v, const char* field) const {
    if (v == 0) return shape_error(node_, std::string(field) + " is 0");
    return Status::ok();
  }

  // One spatial output size of a convolution or pooling window.
  Result<size_t> window_output(size_t input, uint32_t pad_a, uint32_t pad_b, uint32_t kernel, uint32_t stride,
                               uint32_t dilation, bool same_padding, const char* axis) const {
    if (same_padding) return (input + stride - 1) / stride;
    const uint64_t effective = uint64_t{kernel - 1} * dilation + 1;
    const uint64_t padded = uint64_t{input} + pad_a + pad_b;
    if (padded < effective) {
      return shape_error(node_, std::string(axis) + " input " + std::to_string(input) + " plus padding " +
                                    std::to_string(pad_a + uint64_t{pad_b}) + " is smaller than the window " +
                                    std::to_string(effective));
    }
    return static_cast<size_t>((padded - effective) / stride + 1);
  }

  Status broadcast() {
    const Shape& a = in(0);
    const Shape& b = in(1);
    Shape out;
    out.rank = std::max(a.rank, b.rank);
    for (size_t i = 0; i < out.rank; ++i) {
      const size_t da = i < out.rank - a.rank ? 1 : a.dims[i - (out.rank - a.rank)];
      const size_t db = i < out.rank - b.rank ? 1 : b.dims[i - (out.rank - b.rank)];
      if (da != db && da != 1 && db != 1) {
        return shape_error(node_, "input shapes " + a.to_string() + " and " + b.to_string() + " do not broadcast");
      }
      out.dims[i] = da == 1 ? db : da;
    }
    return set_out(0, out);
  }

  // Reshapes `shape` to `rank` dims by merging leading dims or prepending 1s
  // (FC and global pooling outputs whose declared rank differs).
  static Shape fit_rank(const Shape& shape, size_t rank) {
    if (shape.rank == rank || rank == 0) return shape;
    Shape out;
    out.rank = rank;
    if (rank > shape.rank) {
      const size_t pad = rank - shape.rank;
      for (size_t i = 0; i < pad; ++i) out.dims[i] = 1;
      for (size_t i = 0; i < shape.rank; ++i) out.dims[pad + i] = shape.dims[i];
      return out;
    }
    const size_t merge = shape.rank - rank + 1;
    out.dims[0] = 1;
    for (size_t i = 0; i < merge; ++i) out.dims[0] *= shape.dims[i];
    for (size_t i = 1; i < rank; ++i) out.dims[i] = shape.dims[merge + i - 1];
    return out;
  }

  Status fully_connected() {
    const Shape& input = in(0);
    const Shape& filter = in(1);
    ETNA_TRY(rank_is(filter, 2, "filter"));
    if (input.rank < 1) return shape_error(node_, "input has rank 0");
    const bool transposed = node_.flags & 0x1;
    const size_t input_channels = transposed ? filter.dims[0] : filter.dims[1];
    const size_t output_channels = transposed ? filter.dims[1] : filter.dims[0];
    if (input.dims[input.rank - 1] != input_channels) {
      return shape_error(node_, "input " + input.to_string() + " has " + std::to_string(input.dims[input.rank - 1]) +
                                    " channels, filter " + filter.to_string() + " expects " +
                                    std::to_string(input_channels));
    }
    if (has_input(2) && in(2).numel() != output_channels) {
      return shape_error(node_,
                         "bias " + in(2).to_string() + " does not hold " + std::to_string(output_channels) + " values");
    }
    Shape out = input;
    out.dims[out.rank - 1] = output_channels;
    return set_out(0, fit_rank(out, declared_out(0).rank));
  }

  Status convolution() {
    const Shape& input = in(0);
    const Shape& filter = in(1);
    ETNA_TRY(rank_is(input, 4, "input"));
    ETNA_TRY(rank_is(filter, 4, "filter"));
    ETNA_TRY(positive(node_.kernel_height, "kernel_height"));
    ETNA_TRY(positive(node_.kernel_width, "kernel_width"));
    ETNA_TRY(positive(node_.stride_height, "subsampling_height"));
    ETNA_TRY(positive(node_.stride_width, "subsampling_width"));
    ETNA_TRY(positive(node_.dilation_height, "dilation_height"));
    ETNA_TRY(positive(node_.dilation_width, "dilation_width"));
    ETNA_TRY(positive(node_.groups, "groups"));
    ETNA_TRY(positive(node_.group_input_channels, "group_input_channels"));
    ETNA_TRY(positive(node_.group_output_channels, "group_output_channels"));
    const uint64_t groups = node_.groups;
    const uint64_t in_channels = groups * node_.group_input_channels;
    const uint64_t out_channels = groups * node_.group_output_channels;
    const bool depthwise = node_.type == NodeType::kDepthwiseConv2d;
    const bool transposed = node_.type == NodeType::kConvTranspose2d;
    if (depthwise && node_.group_input_channels != 1) {
      return shape_error(node_, "depthwise convolution needs group_input_channels 1, has " +
                                    std::to_string(node_.group_input_channels));
    }
    if (input.dims[3] != in_channels) {
      return shape_error(node_, "input " + input.to_string() + " has " + std::to_string(input.dims[3]) +
                                    " channels, groups x group_input_channels is " + std::to_string(in_channels));
    }
    const Shape expected_filter =
        depthwise ? make_shape({1, node_.kernel_height, node_.kernel_width, static_cast<size_t>(out_channels)})
                  : make_shape({static_cast<size_t>(out_channels), node_.kernel_height, node_.kernel_width,
                                node_.group_input_channels});
    if (filter != expected_filter) {
      return shape_error(node_, "filter has shape " + filter.to_string() + ", expected " + expected_filter.to_string());
    }
    if (has_input(2) && in(2).numel() != out_channels) {
      return shape_error(node_,
                         "bias " + in(2).to_string() + " does not hold " + std::to_string(out_channels) + " values");
    }
    if (transposed) {
      if (node_.adjustment_height >= node_.stride_height || node_.adjustment_width >= node_.stride_width) {
        return shape_error(node_, "adjustment must be smaller than the stride");
      }
      if (input.dims[1] == 0 || input.dims[2] == 0)
        return shape_error(node_, "input " + input.to_string() + " is empty");
      auto size = [&](size_t input_size, uint32_t stride, uint32_t adjustment, uint32_t kernel, uint32_t dilation,
                      uint32_t pad_a, uint32_t pad_b, const char* axis) -> Result<size_t> {
        const int64_t full =
            int64_t{stride} * (int64_t(input_size) - 1) + adjustment + int64_t{kernel - 1} * dilation + 1;
        const int64_t out = full - pad_a - pad_b;
        if (out <= 0) {
          return shape_error(node_, std::string(axis) + " padding " + std::to_string(pad_a + int64_t{pad_b}) +
                                        " crops the whole output");
        }
        return static_cast<size_t>(out);
      };
      auto height = size(input.dims[1], node_.stride_height, node_.adjustment_height, node_.kernel_height,
                         node_.dilation_height, node_.padding_top, node_.padding_bottom, "height");
      if (!height) return height.error();
      auto width = size(input.dims[2], node_.stride_width, node_.adjustment_width, node_.kernel_width,
                        node_.dilation_width, node_.padding_left, node_.padding_right, "width");
      if (!width) return width.error();
      return set_out(0, make_shape({input.dims[0], *height, *width, static_cast<size_t>(out_channels)}));
    }
    const bool same = node_.flags & 0x4;
    if (same && (node_.padding_top || node_.padding_right || node_.padding_bottom || node_.padding_left)) {
      return shape_error(node_, "explicit padding together with TensorFlow SAME padding");
    }
    auto height = window_output(input.dims[1], node_.padding_top, node_.padding_bottom, node_.kernel_height,
                                node_.stride_height, node_.dilation_height, same, "height");
    if (!height) return height.error();
    auto width = window_output(input.dims[2], node_.padding_left, node_.padding_right, node_.kernel_width,
                               node_.stride_width, node_.dilation_width, same, "width");
    if (!width) return width.error();
    return set_out(0, make_shape({input.dims[0], *height, *width, static_cast<size_t>(out_channels)}));
  }

  Status pooling() {
    const Shape& input = in(0);
    ETNA_TRY(rank_is(input, 4, "input"));
    ETNA_TRY(positive(node_.kernel_height, "pooling_height"));
    ETNA_TRY(positive(node_.kernel_width, "pooling_width"));
    const bool argmax = node_.type == NodeType::kArgMaxPooling2d;
    // Argmax windows do not overlap; average pooling ignores dilation.
    const uint32_t stride_h = argmax ? node_.kernel_height : node_.stride_height;
    const uint32_t stride_w = argmax ? node_.kernel_width : node_.stride_width;
    ETNA_TRY(positive(stride_h, "stride_height"));
    ETNA_TRY(positive(stride_w, "stride_width"));
    const bool dilated = node_.type == NodeType::kMaxPooling2d;
    const uint32_t dilation_h = dilated ? std::max<uint32_t>(node_.dilation_height, 1) : 1;
    const uint32_t dilation_w = dilated ? std::max<uint32_t>(node_.dilation_width, 1) : 1;
    const bool same = !argmax && (node_.flags & 0x4);
    auto height = window_output(input.dims[1], node_.padding_top, node_.padding_bottom, node_.kernel_height, stride_h,
                                dilation_h, same, "height");
    if (!height) return height.error();
    auto width = window_output(input.dims[2], node_.padding_left, node_.padding_right, node_.kernel_width, stride_w,
                               dilation_w, same, "width");
    if (!width) return width.error();
    const Shape out = make_shape({input.dims[0], *height, *width, input.dims[3]});
    for (size_t i = 0; i < node_.outputs.size(); ++i) ETNA_TRY(set_out(i, out));
    return Status::ok();
  }

  Status reshape() {
    const Shape& input = in(0);
    const Shape& declared = declared_out(0);
    Shape out;
    if (at_declared_) {
      out = declared;
    } else {
      // new_shape with at most one 0 ("infer this dim"); the declared dims when it is absent.
      if (node_.new_shape.empty()) {
        out = declared;
      } else {
        if (node_.new_shape.size() > kMaxRank) return shape_error(node_, "new_shape has more than 6 dims");
        out.rank = node_.new_shape.size();
        size_t unknown = kMaxRank;
        size_t known = 1;
        for (size_t i = 0; i < out.rank; ++i) {
          out.dims[i] = node_.new_shape[i];
          if (out.dims[i] == 0) {
            if (unknown != kMaxRank) return shape_error(node_, "new_shape has more than one 0 dim");
            unknown = i;
          } else {
            known *= out.dims[i];
          }
        }
        if (unknown != kMaxRank) {
          if (known == 0 || input.numel() % known != 0) {
            return shape_error(node_, "cannot infer new_shape dim for input " + input.to_string());
          }
          out.dims[unknown] = input.numel() / known;
        }
      }
    }
    if (out.numel() != input.numel()) {
      return shape_error(node_, "cannot reshape " + input.to_string() + " to " + out.to_string());
    }
    return set_out(0, out);
  }

  Status transpose() {
    const Shape& input = in(0);
    if (node_.perm.size() != input.rank) {
      return shape_error(node_,
                         "perm has " + std::to_string(node_.perm.size()) + " entries for input " + input.to_string());
    }
    Shape out;
    out.rank = input.rank;
    bool seen[kMaxRank] = {};
    for (size_t i = 0; i < input.rank; ++i) {
      const size_t from = node_.perm[i];
      if (from >= input.rank || seen[from]) return shape_error(node_, "perm is not a permutation of the input dims");
      seen[from] = true;
      out.dims[i] = input.dims[from];
    }
    return set_out(0, out);
  }

  Status concatenate() {
    const Shape& first = in(0);
    if (node_.axis >= first.rank) {
      return shape_error(node_, "axis " + std::to_string(node_.axis) + " is outside input " + first.to_string());
    }
    Shape out = first;
    out.dims[node_.axis] = 0;
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      const Shape& shape = in(i);
      bool compatible = shape.rank == first.rank;
      for (size_t d = 0; compatible && d < shape.rank; ++d) {
        compatible = d == node_.axis || shape.dims[d] == first.dims[d];
      }
      if (!compatible) {
        return shape_error(node_, "input " + shape.to_string() + " does not match " + first.to_string() +
                                      " outside axis " + std::to_string(node_.axis));
      }
      out.dims[node_.axis] += shape.dims[node_.axis];
    }
    return set_out(0, out);
  }

  Status slice() {
    const Shape& input = in(0);
    if (node_.offsets.size() != input.rank || node_.sizes.size() != input.rank) {
      return shape_error(node_, "offsets/sizes have " + std::to_string(node_.offsets.size()) + "/" +
                                    std::to_string(node_.sizes.size()) + " entries for input " + input.to_string());
    }
    Shape out;
    out.rank = input.rank;
    for (size_t d = 0; d < input.rank; ++d) {
      const size_t offset = node_.offsets[d];
      if (offset > input.dims[d]) return shape_error(node_, "offset exceeds input " + input.to_string());
      // A 0 size means "to the end", as XNNPACK reads it.
      const size_t size = node_.sizes[d] == 0 ? input.dims[d] - offset : node_.sizes[d];
      if (size > input.dims[d] - offset) {
        return shape_error(node_, "slice [" + std::to_string(offset) + ", +" + std::to_string(size) + ") of dim " +
                                      std::to_string(d) + " exceeds input " + input.to_string());
      }
      out.dims[d] = size;
    }
    return set_out(0, out);
  }

  Status constant_pad() {
    const Shape& input = in(0);
    if (node_.pre_paddings.size() != input.rank || node_.post_paddings.size() != input.rank) {
      return shape_error(node_, "paddings have " + std::to_string(node_.pre_paddings.size()) + "/" +
                                    std::to_string(node_.post_paddings.size()) + " entries for input " +
                                    input.to_string());
    }
    Shape out = input;
    for (size_t d = 0; d < input.rank; ++d) {
      if (node_.pre_paddings[d] > kMaxElements || node_.post_paddings[d] > kMaxElements)
        return shape_error(node_, "padding too large");
      out.dims[d] = input.dims[d] + node_.pre_paddings[d] + node_.post_paddings[d];
    }
    return set_out(0, out);
  }

  Status batch_matmul() {
    const Shape& a = in(0);
    Shape b = in(1);
    if (!node_.b_perm.empty()) {  // B read through a folded transpose
      for (size_t d = 0; d < b.rank; ++d) b.dims[d] = in(1).dims[node_.b_perm[d]];
    }
    if (a.rank < 2 || a.rank != b.rank) {
      return shape_error(node_, "inputs " + a.to_string() + " and " + b.to_string() + " need the same rank >= 2");
    }
    const size_t r = a.rank;
    const bool transposed = node_.flags & 0x1;
    const size_t k_b = transposed ? b.dims[r - 1] : b.dims[r - 2];
    const size_t n = transposed ? b.dims[r - 2] : b.dims[r - 1];
    bool ok = a.dims[r - 1] == k_b;
    for (size_t d = 0; ok && d + 2 < r; ++d) ok = a.dims[d] == b.dims[d];
    if (!ok) return shape_error(node_, "cannot multiply " + a.to_string() + " by " + b.to_string());
    Shape out = a;
    out.dims[r - 1] = n;
    return set_out(0, out);
  }

  // The slope broadcasts against the input from its last dim (ExecuTorch
  // writes one slope, or one per element of the last dim).
  Status prelu() {
    const Shape& input = in(0);
    const Shape& slope = in(1);
    if (input.rank < 1) return shape_error(node_, "input has rank 0");
    const bool single = slope.numel() == 1;
    bool fits = single || slope.rank <= input.rank;
    for (size_t d = 0; fits && !single && d < slope.rank; ++d) {
      const size_t size = slope.dims[slope.rank - 1 - d];
      fits = size == 1 || size == input.dims[input.rank - 1 - d];
    }
    if (!fits) return shape_error(node_, "slope " + slope.to_string() + " does not broadcast to " + input.to_string());
    return set_out(0, input);
  }

  Status softmax() {
    if (in(0).rank < 1) return shape_error(node_, "input has rank 0");
    return set_out(0, in(0));
  }

  Status same_as_input() { return set_out(0, in(0)); }

  Status global_pooling() {
    const Shape& input = in(0);
    ETNA_TRY(rank_is(input, 4, "input"));
    return set_out(0, fit_rank(make_shape({input.dims[0], 1, 1, input.dims[3]}), declared_out(0).rank));
  }

  Status resize_bilinear() {
    const Shape& input = in(0);
    ETNA_TRY(rank_is(input, 4, "input"));
    ETNA_TRY(positive(node_.new_height, "new_height"));
    ETNA_TRY(positive(node_.new_width, "new_width"));
    return set_out(0, make_shape({input.dims[0], node_.new_height, node_.new_width, input.dims[3]}));
  }

 private:
  const Graph& graph_;
  const Node& node_;
  std::vector<Shape>& shapes_;
  bool at_declared_;
};

}  // namespace

Status broadcast_shape(ShapeCall& call) { return ShapeRules(call).broadcast(); }
Status prelu_shape(ShapeCall& call) { return ShapeRules(call).prelu(); }
Status softmax_shape(ShapeCall& call) { return ShapeRules(call).softmax(); }
Status same_shape_as_input(ShapeCall& call) { return ShapeRules(call).same_as_input(); }
Status fully_connected_shape(ShapeCall& call) { return ShapeRules(call).fully_connected(); }
Status convolution_shape(ShapeCall& call) { return ShapeRules(call).convolution(); }
Status pooling_shape(ShapeCall& call) { return ShapeRules(call).pooling(); }
Status global_pooling_shape(ShapeCall& call) { return ShapeRules(call).global_pooling(); }
Status resize_bilinear_shape(ShapeCall& call) { return ShapeRules(call).resize_bilinear(); }
Status constant_pad_shape(ShapeCall& call) { return ShapeRules(call).constant_pad(); }
Status reshape_shape(ShapeCall& call) { return ShapeRules(call).reshape(); }
Status transpose_shape(ShapeCall& call) { return ShapeRules(call).transpose(); }
Status concatenate_shape(ShapeCall& call) { return ShapeRules(call).concatenate(); }
Status slice_shape(ShapeCall& call) { return ShapeRules(call).slice(); }
Status batch_matmul_shape(ShapeCall& call) { return ShapeRules(call).batch_matmul(); }

std::vector<Shape> declared_shapes(const Graph& graph) {
  std::vector<Shape> shapes(graph.values.size());
  for (size_t i = 0; i < graph.values.size(); ++i) shapes[i] = graph.values[i].shape;
  return shapes;
}

Status infer_node_shapes(const Graph& graph, const Node& node, std::vector<Shape>& shapes, bool at_declared) {
  const NodeTypeInfo& info = node_type_info(node.type);
  if (!info.shape) return shape_error(node, "has no shape rule");
  ShapeCall call{graph, node, shapes, at_declared};
  return info.shape(call);
}

Status infer_shapes(const Graph& graph, std::vector<Shape>& shapes, bool at_declared) {
  for (const Node& node : graph.nodes) ETNA_TRY(infer_node_shapes(graph, node, shapes, at_declared));
  return Status::ok();
}

}  // namespace etna::xnn
