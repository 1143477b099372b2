#include "backends/xnnpack/graph.h"

#include <algorithm>

namespace etna::xnn {

std::string datatype_name(Datatype type) {
  const int16_t code = static_cast<int16_t>(type);
  if (code < 0 || code > static_cast<int16_t>(Datatype::MAX)) return "code " + std::to_string(code);
  return ::etna::xnnpack::EnumNameDatatype(type);
}

size_t datatype_size(Datatype type) {
  switch (type) {
    case Datatype::fp32:
    case Datatype::qint32:
    case Datatype::qcint32: return 4;
    case Datatype::fp16:
    case Datatype::bf16: return 2;
    case Datatype::qint8:
    case Datatype::quint8:
    case Datatype::qcint8:
    case Datatype::qdint8: return 1;
    default: return 0;
  }
}

Datatype argument_datatype_of(const Value& value) {
  return value.argument_datatype != Datatype::invalid ? value.argument_datatype : value.datatype;
}

bool is_four_bit(Datatype type) { return type == Datatype::qcint4 || type == Datatype::qbint4; }

uint64_t constant_bytes(Datatype type, const Shape& shape) {
  if (!is_four_bit(type)) return uint64_t{shape.numel()} * datatype_size(type);
  const uint64_t last = shape.rank ? shape.dims[shape.rank - 1] : 1;
  if (last == 0) return 0;
  return shape.numel() / last * ((last + 1) / 2);
}

size_t row_count(const Shape& shape) {
  const size_t last = shape.rank ? shape.dims[shape.rank - 1] : 1;
  return last ? shape.numel() / last : 0;
}

size_t dynamic_row_length(const Shape& shape, size_t nonbatch_dims) {
  size_t length = 1;
  for (size_t d = shape.rank - std::min(nonbatch_dims, shape.rank); d < shape.rank; ++d) length *= shape.dims[d];
  return length;
}

size_t dynamic_params_offset(const Shape& shape) { return (shape.numel() + 7) / 8 * 8; }

size_t value_bytes(Datatype type, const Shape& shape) {
  if (type == Datatype::qdint8) return dynamic_params_offset(shape) + row_count(shape) * sizeof(DynamicRowParams);
  return shape.numel() * datatype_size(type);
}

std::string Node::describe() const { return "node " + std::to_string(index) + " (" + node_type_name(type) + ")"; }

std::string Graph::describe_value(uint32_t index) const {
  if (index >= values.size()) return "value index " + std::to_string(index);
  const Value& value = values[index];
  const std::string computed =
      value.argument_datatype == Datatype::invalid ? "" : ", computed in " + datatype_name(value.datatype);
  return "value " + std::to_string(value.id) + " (" + datatype_name(argument_datatype_of(value)) +
         value.shape.to_string() + computed + ")";
}

}  // namespace etna::xnn
