// The delegate's own model of an XNNPACK payload: values and nodes with every
// id resolved to a dense index and every constant resolved to bytes. Built
// once by parse_payload() and checked by check_graph(); everything after that
// indexes it without re-checking.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "backends/xnnpack/generated/xnnpack_generated.h"
#include "core/bytes.h"
#include "core/shape.h"

namespace etna::xnn {

using Datatype = ::etna::xnnpack::Datatype;

// The serialized "no value" id (also XNNPACK's XNN_INVALID_VALUE_ID).
constexpr uint32_t kInvalidId = 0xFFFFFFFFu;
// Dense index standing for an absent optional input (e.g. no bias).
constexpr uint32_t kNoValue = 0xFFFFFFFFu;
// The XNNPACK release we link supports up to 6 dims (XNN_MAX_TENSOR_DIMS).
constexpr size_t kMaxRank = 6;
// Upstream rejects graphs with more external values than this.
constexpr uint32_t kMaxExterns = 4096;

// Wire codes of XNodeUnion.
enum class NodeType : uint8_t {
  kAdd = 1,
  kFullyConnected = 2,
  kSoftmax = 3,
  kSigmoid = 4,
  kStaticTranspose = 5,
  kClamp = 6,
  kConv2d = 7,
  kDiv = 8,
  kStaticResizeBilinear2d = 9,
  kStaticConstantPad = 10,
  kAvgPooling2d = 11,
  kMinimum = 12,
  kDepthwiseConv2d = 13,
  kMaxPooling2d = 14,
  kMultiply = 15,
  kSubtract = 16,
  kFloor = 17,
  kConvert = 18,
  kGlobalAvgPooling2d = 19,
  kStaticReshape = 20,
  kArgMaxPooling2d = 21,
  kSquareRoot = 22,
  kCeiling = 23,
  kHardswish = 24,
  kLeakyRelu = 25,
  kMaximum = 26,
  kNegate = 27,
  kSquare = 28,
  kElu = 29,
  kAbs = 30,
  kPRelu = 31,
  kConcatenate2 = 32,
  kConcatenate3 = 33,
  kConcatenate4 = 34,
  kStaticSlice = 35,
  kScaledDotProductAttention = 36,
  kBatchMatrixMultiply = 37,
  kConcatenate5 = 38,
  kConvTranspose2d = 39,
  kReciprocalSquareRoot = 40,
  kLog = 41,
  kGelu = 42,
  kTanh = 43,
  kExp = 44,
  kSin = 45,
  kCopy = 46,
  kCos = 47,
};
constexpr uint8_t kLastNodeType = 47;

// "XNNConv2d" (from the type's row, node_types.cpp); "code 93" for codes outside the union.
std::string node_type_name(uint8_t code);
inline std::string node_type_name(NodeType type) { return node_type_name(static_cast<uint8_t>(type)); }
// "fp32"; "code 77" for codes outside the enum.
std::string datatype_name(Datatype type);
// Bytes per element for the datatypes the linked XNNPACK knows (0..7),
// qdint8 (1) and bf16 (2); 0 otherwise (4-bit types pack two elements per byte).
size_t datatype_size(Datatype type);
// Whether a datatype holds two 4-bit values per byte (qcint4, qbint4).
bool is_four_bit(Datatype type);

using Shape = BasicShape<size_t, kMaxRank>;

// Bytes a constant of this datatype and shape occupies: 4-bit types pad each
// row (last dim) to whole bytes, as the exporter writes them.
uint64_t constant_bytes(Datatype type, const Shape& shape);
// One row of a qdint8 value, quantized at run time: real = scale * (q - zero_point).
// etna stores the row as uint8 with zero_point in [0, 255] (the int8 value plus
// 128, the same real numbers), which is what the dot-product instructions take.
struct DynamicRowParams {
  float scale;
  int32_t zero_point;
};
// Rows of a value: its elements over its last dim (1 for rank 0).
size_t row_count(const Shape& shape);
// Elements one qdint8 scale and zero point cover: the product of the last
// `nonbatch_dims` dims (the last dim for per-token values feeding a fully
// connected node, a whole NHWC image for a convolution's input).
size_t dynamic_row_length(const Shape& shape, size_t nonbatch_dims);
// Where a qdint8 buffer keeps its DynamicRowParams, one per quantized row
// (room for one per last-dim row, the most there can be): behind the data,
// 8-byte aligned.
size_t dynamic_params_offset(const Shape& shape);
// Bytes of a value's buffer (qdint8 values include their row parameters).
size_t value_bytes(Datatype type, const Shape& shape);

// Scales per channel, or per channel and block (blocks innermost): one
// immutable list that copies of a graph share. A program's payloads share
// one list per distinct content (XnnpackProgramContext::remember_checked_payload),
// so a method-per-entry-point LLM holds its millions of block scales once.
class ScaleList {
 public:
  ScaleList() = default;
  explicit ScaleList(std::vector<float> values)
      : values_(std::make_shared<const std::vector<float>>(std::move(values))) {}
  size_t size() const { return values_ ? values_->size() : 0; }
  bool empty() const { return size() == 0; }
  const float* data() const { return values_ ? values_->data() : nullptr; }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  float operator[](size_t i) const { return (*values_)[i]; }
  // The list itself: the same for copies of it (a packed operator's cache
  // key names its scales by this). A list lives as long as some graph holds
  // it, so while an operator packed from it lives, no other list is here.
  const void* identity() const { return values_.get(); }

 private:
  std::shared_ptr<const std::vector<float>> values_;
};

struct Quantization {
  enum class Kind : uint8_t {
    kNone,
    kPerTensor,
    kPerChannel,
    kPerToken,   // qdint8: scale and zero point chosen per row at run time
    kBlockwise,  // qbint4: one scale per channel and block of block_size elements
  };
  Kind kind = Kind::kNone;
  float scale = 1.0f;
  int32_t zero_point = 0;
  ScaleList channel_scales;
  size_t channel_dim = 0;
  size_t block_size = 0;     // kBlockwise
  size_t nonbatch_dims = 0;  // kPerToken: trailing dims sharing one scale and zero point
};

struct Value {
  uint32_t id = 0;  // the serialized id_out, used in messages
  Datatype datatype = Datatype::invalid;
  Shape shape;  // as declared (the upper bound for dynamic inputs)
  Quantization quant;

  bool is_constant = false;
  ByteSpan constant;         // valid during init only (points into the program)
  std::string constant_key;  // "name:<named key>" or "sha256:<hex of bytes>"

  bool is_input = false;
  bool is_output = false;
  uint32_t external_id = kInvalidId;  // index into the DelegateCall args
  // bf16 or fp16 for an external value declared so that the delegate computes
  // in fp32 (datatype): converted from the caller's tensor on the way in,
  // rounded into it on the way out (compute_16bit_externals_in_fp32).
  Datatype argument_datatype = Datatype::invalid;

  int producer = -1;                // node index; -1 for inputs, constants, unused values
  std::vector<uint32_t> consumers;  // node indices, ascending, may repeat
};

// The datatype of the caller's tensor for an external value: its
// argument_datatype when set, its datatype otherwise.
Datatype argument_datatype_of(const Value& value);

struct Node {
  size_t index = 0;
  NodeType type = NodeType::kAdd;
  std::vector<uint32_t> inputs;   // dense value indices; kNoValue for an absent optional input
  std::vector<uint32_t> outputs;  // dense value indices
  float output_min = 0;
  float output_max = 0;
  uint32_t flags = 0;

  // Geometry of convolutions and poolings (unused fields stay 0).
  uint32_t padding_top = 0, padding_right = 0, padding_bottom = 0, padding_left = 0;
  uint32_t kernel_height = 0, kernel_width = 0;  // pooling size for poolings
  uint32_t stride_height = 0, stride_width = 0;  // "subsampling" for convolutions
  uint32_t dilation_height = 0, dilation_width = 0;
  uint32_t adjustment_height = 0, adjustment_width = 0;
  uint32_t groups = 0, group_input_channels = 0, group_output_channels = 0;

  uint32_t axis = 0;                                // concatenation
  uint32_t new_height = 0, new_width = 0;           // bilinear resize
  float alpha = 0;                                  // ELU
  float negative_slope = 0;                         // leaky ReLU
  float padding_value = 0;                          // constant pad
  std::vector<size_t> perm;                         // transpose
  std::vector<size_t> new_shape;                    // reshape
  std::vector<size_t> offsets, sizes;               // slice
  std::vector<size_t> pre_paddings, post_paddings;  // constant pad
  // Batch matrix multiply: the perm of a transpose folded into its input 1
  // (empty as parsed; see rewrites.h).
  std::vector<size_t> b_perm;

  std::string describe() const;  // "node 3 (XNNConv2d)"
};

struct Graph {
  uint32_t num_externs = 0;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<uint32_t> inputs;   // dense value indices of external inputs
  std::vector<uint32_t> outputs;  // dense value indices of external outputs

  std::string describe_value(uint32_t index) const;  // "value 5 (fp32[1, 8, 16, 16])"
};

}  // namespace etna::xnn
