// Helpers shared by the XNNPACK delegate tests: tensors
// over local buffers, a builder for XNNPACK payloads, and deterministic
// input values.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/xnnpack/delegate.h"
#include "backends/xnnpack/dynamic_linear.h"
#include "backends/xnnpack/module_context.h"
#include "backends/xnnpack/payload.h"
#include "backends/xnnpack/xnn_library.h"
#include "core/evalue.h"
#include "core/tensor.h"
#include "fixtures.h"
#include "backends/xnnpack/generated/xnnpack_generated.h"

namespace etna::test {

// A tensor over a local buffer, with `slack` bytes of capacity beyond its
// current size (0 makes XNNPACK-read inputs go through the staging copy).
class LocalTensor {
 public:
  LocalTensor(ScalarType dtype, std::vector<int64_t> sizes, size_t slack = 64,
              ShapeDynamism dynamism = ShapeDynamism::kStatic, size_t capacity_elements = 0) {
    tensor_.init(dtype, sizes.size(), sizes.data(), nullptr, dynamism);
    const size_t bytes = std::max(tensor_.nbytes(), capacity_elements * tensor_.element_size()) + slack;
    storage_.assign(bytes / 8 + 2, 0);
    tensor_.set_data(storage_.data(), bytes);
    value_ = EValue::from_tensor(&tensor_);
  }
  LocalTensor(const LocalTensor&) = delete;
  LocalTensor& operator=(const LocalTensor&) = delete;

  Tensor& tensor() { return tensor_; }
  EValue* value() { return &value_; }
  float* floats() { return tensor_.data_as<float>(); }
  size_t numel() const { return tensor_.numel(); }
  void fill(const std::vector<float>& values) { std::memcpy(floats(), values.data(), values.size() * sizeof(float)); }
  std::vector<float> to_vector() const {
    return std::vector<float>(tensor_.data_as<float>(), tensor_.data_as<float>() + tensor_.numel());
  }

 private:
  Tensor tensor_;
  std::vector<uint64_t> storage_;  // 8-byte aligned
  EValue value_;
};

// Deterministic values in [-range, range].
inline std::vector<float> pseudo_random(size_t count, uint32_t seed, float range = 1.0f) {
  std::vector<float> values(count);
  uint32_t state = seed * 2654435761u + 12345u;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = (static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f) * range;
  }
  return values;
}

inline std::vector<float> floats_from(ByteSpan bytes) {
  std::vector<float> values(bytes.size / sizeof(float));
  std::memcpy(values.data(), bytes.data, values.size() * sizeof(float));
  return values;
}

// Relative error check used by every numeric test: |a - b| <= tol * max(1, |b|).
inline ::testing::AssertionResult close_to(const std::vector<float>& actual, const std::vector<float>& expected,
                                           float tolerance = 1e-4f) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    const float scale = std::max(1.0f, std::fabs(expected[i]));
    if (!(std::fabs(actual[i] - expected[i]) <= tolerance * scale)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs expected " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

namespace fbx = ::etna::xnnpack;

// Builds XNNPACK payloads in any of the three constant layouts.
class PayloadBuilder {
 public:
  enum class Layout {
    kConstantRegion,  // XH00 header, constants in the payload's constant region (by offset)
    kNamedData,       // XH00 header, constants in named data (by key)
    kLegacy,          // no header, constants in the FlatBuffer's constant_buffer
  };

  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // A tensor value; returns its id. `constant` (if any) holds its bytes.
  uint32_t tensor(fbx::Datatype datatype, std::vector<uint32_t> dims, uint32_t external_id = kNone, uint32_t flags = 0,
                  const std::vector<float>* constant = nullptr) {
    const uint32_t buffer_index = constant ? add_constant(constant->data(), constant->size() * sizeof(float)) : 0;
    const uint32_t id = next_id_++;
    auto value = make_tensor_value(datatype, dims, buffer_index, external_id, flags, id);
    values_.push_back(fbx::CreateValue(fbb_, fbx::ValueUnion::TensorValue, value.Union()));
    return id;
  }
  // A per-tensor quantized value; `bytes` (if any) holds constant data.
  uint32_t quantized(fbx::Datatype datatype, std::vector<uint32_t> dims, float scale, int32_t zero_point,
                     uint32_t external_id = kNone, uint32_t flags = 0, const std::vector<uint8_t>* bytes = nullptr) {
    const uint32_t buffer_index = bytes ? add_constant(bytes->data(), bytes->size()) : 0;
    const uint32_t id = next_id_++;
    auto value = make_tensor_value(datatype, dims, buffer_index, external_id, flags, id);
    auto params = fbx::CreatePerTensorQuant(fbb_, scale, zero_point);
    auto quantized = fbx::CreateQuantizedTensorValue(fbb_, value, fbx::QuantParams::PerTensorQuant, params.Union());
    values_.push_back(fbx::CreateValue(fbb_, fbx::ValueUnion::QuantizedTensorValue, quantized.Union()));
    return id;
  }
  // A per-channel quantized constant (qcint8 filters, qcint32 biases), scales inline.
  uint32_t channelwise(fbx::Datatype datatype, std::vector<uint32_t> dims, const std::vector<float>& scales,
                       int32_t channel_dim, const std::vector<uint8_t>& bytes) {
    const uint32_t buffer_index = add_constant(bytes.data(), bytes.size());
    const uint32_t id = next_id_++;
    auto value = make_tensor_value(datatype, dims, buffer_index, kNone, 0, id);
    auto scale_vector = fbb_.CreateVector(scales);
    auto params = fbx::CreatePerChannelQuant(fbb_, scale_vector, channel_dim, 0, static_cast<uint32_t>(scales.size()));
    auto quantized = fbx::CreateQuantizedTensorValue(fbb_, value, fbx::QuantParams::PerChannelQuant, params.Union());
    values_.push_back(fbx::CreateValue(fbb_, fbx::ValueUnion::QuantizedTensorValue, quantized.Union()));
    return id;
  }
  // A quantized value with parameters of any kind, built by the caller in
  // fbb() beforehand; `bytes` (if any) holds constant data.
  uint32_t quantized_with(fbx::Datatype datatype, std::vector<uint32_t> dims, fbx::QuantParams type,
                          flatbuffers::Offset<void> params, const std::vector<uint8_t>* bytes = nullptr,
                          uint32_t external_id = kNone, uint32_t flags = 0) {
    const uint32_t buffer_index = bytes ? add_constant(bytes->data(), bytes->size()) : 0;
    const uint32_t id = next_id_++;
    auto value = make_tensor_value(datatype, dims, buffer_index, external_id, flags, id);
    auto quantized = fbx::CreateQuantizedTensorValue(fbb_, value, type, params);
    values_.push_back(fbx::CreateValue(fbb_, fbx::ValueUnion::QuantizedTensorValue, quantized.Union()));
    return id;
  }
  // A constant buffer no value owns (e.g. scales by scale_buffer_idx); returns its index.
  uint32_t buffer(const std::vector<uint8_t>& bytes) { return add_constant(bytes.data(), bytes.size()); }
  uint32_t input(std::vector<uint32_t> dims, uint32_t external_id) {
    return tensor(fbx::Datatype::fp32, std::move(dims), external_id, 1);
  }
  uint32_t output(std::vector<uint32_t> dims, uint32_t external_id) {
    return tensor(fbx::Datatype::fp32, std::move(dims), external_id, 2);
  }
  uint32_t internal(std::vector<uint32_t> dims) { return tensor(fbx::Datatype::fp32, std::move(dims)); }
  uint32_t constant(std::vector<uint32_t> dims, const std::vector<float>& data) {
    return tensor(fbx::Datatype::fp32, std::move(dims), kNone, 0, &data);
  }

  void node(fbx::NodeUnion type, flatbuffers::Offset<void> table, std::optional<std::pair<float, float>> bounds = {}) {
    flatbuffers::Offset<fbx::OutputMinMax> min_max;
    if (bounds) min_max = fbx::CreateOutputMinMax(fbb_, bounds->first, bounds->second);
    nodes_.push_back(fbx::CreateNode(fbb_, type, table, 0, min_max));
  }
  void unary(fbx::NodeUnion type, uint32_t in, uint32_t out) { node(type, fbx::CreateUnary(fbb_, in, out, 0).Union()); }
  void binary(fbx::NodeUnion type, uint32_t a, uint32_t b, uint32_t out,
              std::optional<std::pair<float, float>> bounds = {}, uint32_t flags = 0) {
    node(type, fbx::CreateBinary(fbb_, a, b, out, flags).Union(), bounds);
  }
  void fully_connected(uint32_t in, uint32_t filter, uint32_t bias, uint32_t out, uint32_t flags = 0,
                       std::optional<std::pair<float, float>> bounds = {}) {
    node(fbx::NodeUnion::XNNFullyConnected, fbx::CreateFullyConnected(fbb_, in, filter, bias, out, flags).Union(),
         bounds);
  }
  void transpose(std::vector<uint32_t> perm, uint32_t in, uint32_t out) {
    auto perm_vector = fbb_.CreateVector(perm);
    node(fbx::NodeUnion::XNNStaticTranspose,
         fbx::CreateStaticTranspose(fbb_, static_cast<uint32_t>(perm.size()), perm_vector, in, out, 0).Union());
  }
  void concatenate(uint32_t axis, const std::vector<uint32_t>& inputs, uint32_t out) {
    static const fbx::NodeUnion kTypes[] = {fbx::NodeUnion::XNNConcatenate2, fbx::NodeUnion::XNNConcatenate3,
                                            fbx::NodeUnion::XNNConcatenate4, fbx::NodeUnion::XNNConcatenate5};
    uint32_t ids[5] = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < inputs.size() && i < 5; ++i) ids[i] = inputs[i];
    node(kTypes[inputs.size() - 2],
         fbx::CreateConcatenate(fbb_, axis, ids[0], ids[1], ids[2], ids[3], out, 0, ids[4]).Union());
  }
  void slice(std::vector<uint32_t> offsets, std::vector<uint32_t> sizes, uint32_t in, uint32_t out) {
    auto offsets_vector = fbb_.CreateVector(offsets);
    auto sizes_vector = fbb_.CreateVector(sizes);
    node(fbx::NodeUnion::XNNStaticSlice,
         fbx::CreateStaticSlice(fbb_, static_cast<uint32_t>(offsets.size()), offsets_vector, sizes_vector, in, out, 0)
             .Union());
  }
  void reshape(std::vector<uint32_t> new_shape, uint32_t in, uint32_t out) {
    auto shape_vector = fbb_.CreateVector(new_shape);
    node(fbx::NodeUnion::XNNStaticReshape,
         fbx::CreateStaticReshape(fbb_, static_cast<uint32_t>(new_shape.size()), shape_vector, in, out, 0).Union());
  }

  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }
  // Keys given to constants in the kNamedData layout: "const<index>".
  const std::map<std::string, std::vector<uint8_t>>& named_data() const { return named_; }
  xnn::NamedDataLookup lookup() const {
    return [this](std::string_view key) -> std::optional<ByteSpan> {
      auto it = named_.find(std::string(key));
      if (it == named_.end()) return std::nullopt;
      return ByteSpan{it->second.data(), it->second.size()};
    };
  }

  std::vector<uint8_t> finish(Layout layout, uint32_t num_externs, const char* identifier = "XN01") {
    std::vector<flatbuffers::Offset<fbx::ConstantDataOffset>> table;
    std::vector<flatbuffers::Offset<fbx::Buffer>> buffers;
    std::vector<uint8_t> region;
    if (layout == Layout::kLegacy) {
      buffers.push_back(fbx::CreateBuffer(fbb_));
      for (const auto& bytes : constants_) {
        fbb_.ForceVectorAlignment(bytes.size(), 1, 16);
        buffers.push_back(fbx::CreateBuffer(fbb_, fbb_.CreateVector(bytes)));
      }
    } else {
      table.push_back(fbx::CreateConstantDataOffset(fbb_, 0, 0));
      for (size_t i = 0; i < constants_.size(); ++i) {
        const auto& bytes = constants_[i];
        if (layout == Layout::kNamedData) {
          const std::string key = "const" + std::to_string(i + 1);
          named_[key] = bytes;
          table.push_back(fbx::CreateConstantDataOffset(fbb_, UINT64_MAX, bytes.size(), fbb_.CreateString(key)));
        } else {
          const uint64_t offset = region.size();
          region.insert(region.end(), bytes.begin(), bytes.end());
          region.resize((region.size() + 15) / 16 * 16, 0);
          table.push_back(fbx::CreateConstantDataOffset(fbb_, offset, bytes.size()));
        }
      }
    }
    auto graph = fbx::CreateGraph(fbb_, fbb_.CreateString("0"), fbb_.CreateVector(nodes_), fbb_.CreateVector(values_),
                                  num_externs, 0, 0, layout == Layout::kLegacy ? fbb_.CreateVector(buffers) : 0, 0,
                                  layout == Layout::kLegacy ? 0 : fbb_.CreateVector(table));
    fbb_.Finish(graph, identifier);
    const uint8_t* fb = fbb_.GetBufferPointer();
    const size_t fb_size = fbb_.GetSize();
    if (layout == Layout::kLegacy) return std::vector<uint8_t>(fb, fb + fb_size);

    const size_t fb_offset = 32;
    const size_t constant_offset = fb_offset + (fb_size + 15) / 16 * 16;
    std::vector<uint8_t> payload(constant_offset + region.size(), 0);
    std::memcpy(payload.data() + 4, "XH00", 4);
    put(payload, 8, uint64_t{30}, 2);
    put(payload, 10, fb_offset, 4);
    put(payload, 14, fb_size, 4);
    put(payload, 18, constant_offset, 4);
    put(payload, 22, region.size(), 8);
    std::memcpy(payload.data() + fb_offset, fb, fb_size);
    if (!region.empty()) std::memcpy(payload.data() + constant_offset, region.data(), region.size());
    return payload;
  }

  // Convolution-family node (Conv2d, DepthwiseConv2d, ConvTranspose2d).
  struct ConvParams {
    uint32_t pad_top = 0, pad_right = 0, pad_bottom = 0, pad_left = 0;
    uint32_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
    uint32_t group_in = 1, group_out = 1, groups = 1, adjust_h = 0, adjust_w = 0;
  };
  void convolution(fbx::NodeUnion type, const ConvParams& p, uint32_t in, uint32_t filter, uint32_t bias, uint32_t out,
                   std::optional<std::pair<float, float>> bounds = {}) {
    node(type,
         fbx::CreateConvolution(fbb_, p.pad_top, p.pad_right, p.pad_bottom, p.pad_left, p.kernel_h, p.kernel_w,
                                p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.group_in, p.group_out, p.groups,
                                p.adjust_h, p.adjust_w, in, filter, bias, out, 0)
             .Union(),
         bounds);
  }
  void pooling(fbx::NodeUnion type, uint32_t pad, uint32_t size, uint32_t stride, uint32_t in, uint32_t out,
               uint32_t flags = 0x40) {
    node(type,
         fbx::CreatePooling2d(fbb_, pad, pad, pad, pad, size, size, stride, stride, 1, 1, in, out, flags).Union());
  }

  static void put(std::vector<uint8_t>& bytes, size_t offset, uint64_t value, size_t width) {
    for (size_t i = 0; i < width; ++i) bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  }

 private:
  uint32_t add_constant(const void* data, size_t size) {
    std::vector<uint8_t> bytes(size);
    if (size) std::memcpy(bytes.data(), data, size);
    constants_.push_back(std::move(bytes));
    return static_cast<uint32_t>(constants_.size());
  }
  flatbuffers::Offset<fbx::TensorValue> make_tensor_value(fbx::Datatype datatype, const std::vector<uint32_t>& dims,
                                                          uint32_t buffer_index, uint32_t external_id, uint32_t flags,
                                                          uint32_t id) {
    auto dims_vector = fbb_.CreateVector(dims);
    return fbx::CreateTensorValue(fbb_, datatype, static_cast<uint32_t>(dims.size()), dims_vector, buffer_index,
                                  external_id, flags, id);
  }

  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<flatbuffers::Offset<fbx::Value>> values_;
  std::vector<flatbuffers::Offset<fbx::Node>> nodes_;
  std::vector<std::vector<uint8_t>> constants_;
  std::map<std::string, std::vector<uint8_t>> named_;
  uint32_t next_id_ = 0;
};

// Parses and initialises a payload the way XnnpackBackend::init does, minus
// the Program (named data comes from `lookup`).
inline Result<std::unique_ptr<xnn::XnnpackDelegate>> make_delegate(ByteSpan payload, xnn::XnnpackModuleContext& context,
                                                                   const xnn::NamedDataLookup& lookup = {}) {
  Status initialized = xnn::ensure_xnnpack_initialized();
  if (!initialized) return initialized.error();
  auto parsed = xnn::parse_payload(payload, lookup);
  if (!parsed) return parsed.error();
  return xnn::XnnpackDelegate::create(std::move(*parsed), context, "test delegate");
}
inline Result<std::unique_ptr<xnn::XnnpackDelegate>> make_delegate(const std::vector<uint8_t>& payload,
                                                                   xnn::XnnpackModuleContext& context,
                                                                   const xnn::NamedDataLookup& lookup = {}) {
  return make_delegate(ByteSpan{payload.data(), payload.size()}, context, lookup);
}

inline Status run_delegate(DelegateHandle& handle, const std::vector<LocalTensor*>& tensors) {
  std::vector<EValue*> args;
  for (LocalTensor* t : tensors) args.push_back(t->value());
  return handle.execute(args.data(), args.size());
}

// Resizes the bounded input x to `sizes`, fills it with pseudo_random values
// from `seed` (kept in `input`) and runs the delegate from x into y.
inline void run_resized(DelegateHandle& handle, LocalTensor& x, LocalTensor& y, const std::vector<int64_t>& sizes,
                        uint32_t seed, std::vector<float>& input) {
  ASSERT_TRUE(x.tensor().resize(sizes.size(), sizes.data()));
  input = pseudo_random(x.numel(), seed);
  x.fill(input);
  Status ran = run_delegate(handle, {&x, &y});
  ASSERT_TRUE(ran) << ran.error().message;
}

// An input (sizes and values) or an output (sizes) of run_graph.
struct Io {
  Io(std::vector<int64_t> sizes_in, std::vector<float> data_in = {}, ScalarType dtype_in = ScalarType::kFloat)
      : sizes(std::move(sizes_in)), data(std::move(data_in)), dtype(dtype_in) {}
  std::vector<int64_t> sizes;
  std::vector<float> data;  // inputs only
  ScalarType dtype;
};

// Runs a payload whose external ids are the inputs then the outputs.
inline std::vector<std::vector<float>> run_graph(PayloadBuilder& builder, const std::vector<Io>& inputs,
                                                 const std::vector<Io>& outputs) {
  const auto payload =
      builder.finish(PayloadBuilder::Layout::kConstantRegion, static_cast<uint32_t>(inputs.size() + outputs.size()));
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, builder.lookup());
  EXPECT_TRUE(delegate) << delegate.error().message;
  if (!delegate) return {};
  std::vector<std::unique_ptr<LocalTensor>> tensors;
  std::vector<LocalTensor*> args;
  for (const Io& io : inputs) {
    tensors.push_back(std::make_unique<LocalTensor>(io.dtype, io.sizes));
    tensors.back()->fill(io.data);
  }
  for (const Io& io : outputs) tensors.push_back(std::make_unique<LocalTensor>(io.dtype, io.sizes));
  for (auto& t : tensors) args.push_back(t.get());
  Status status = run_delegate(**delegate, args);
  EXPECT_TRUE(status) << status.error().message;
  std::vector<std::vector<float>> results;
  for (size_t i = inputs.size(); i < tensors.size(); ++i) {
    if (tensors[i]->tensor().dtype() == ScalarType::kLong) {
      std::vector<float> widened;
      const int64_t* values = tensors[i]->tensor().data_as<int64_t>();
      for (size_t k = 0; k < tensors[i]->numel(); ++k) widened.push_back(static_cast<float>(values[k]));
      results.push_back(widened);
    } else {
      results.push_back(tensors[i]->to_vector());
    }
  }
  return results;
}

}  // namespace etna::test
