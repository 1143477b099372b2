// Shape inference over the node list (spec section 6 rules). The linked
// XNNPACK fixes shapes when a graph is defined, so the delegate computes every
// intermediate and output shape itself: once at init from the declared input
// shapes (and compares with the declared ones), and again for each new input
// shape a call brings.
#pragma once

#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/node_types.h"
#include "core/status.h"

namespace etna::xnn {

// Fills shapes[output] for every node output, in node order. On entry,
// shapes holds the shapes of external inputs and constants; `at_declared`
// says they are the declared ones (the init pass), which lets nodes whose
// serialized output dims are authoritative (reshape) use them.
Status infer_shapes(const Graph& graph, std::vector<Shape>& shapes, bool at_declared);
// The same for one node.
Status infer_node_shapes(const Graph& graph, const Node& node, std::vector<Shape>& shapes, bool at_declared);

// Declared shapes of every value (the init pass starts from these).
std::vector<Shape> declared_shapes(const Graph& graph);

// The rows' shape rules (node_types.cpp), spec section 6.
Status broadcast_shape(ShapeCall& call);      // numpy-style broadcast of two inputs
Status prelu_shape(ShapeCall& call);          // the input's; the slope broadcasts to it
Status softmax_shape(ShapeCall& call);        // the input's, rank >= 1
Status same_shape_as_input(ShapeCall& call);  // elementwise
Status fully_connected_shape(ShapeCall& call);
Status convolution_shape(ShapeCall& call);  // regular, depthwise and transposed
Status pooling_shape(ShapeCall& call);      // average, max and argmax windows
Status global_pooling_shape(ShapeCall& call);
Status resize_bilinear_shape(ShapeCall& call);
Status constant_pad_shape(ShapeCall& call);
Status reshape_shape(ShapeCall& call);
Status transpose_shape(ShapeCall& call);
Status concatenate_shape(ShapeCall& call);
Status slice_shape(ShapeCall& call);
Status batch_matmul_shape(ShapeCall& call);

}  // namespace etna::xnn
