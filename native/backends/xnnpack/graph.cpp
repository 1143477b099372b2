#include "backends/xnnpack/graph.h"

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
    case Datatype::qcint32:
      return 4;
    case Datatype::fp16:
      return 2;
    case Datatype::qint8:
    case Datatype::quint8:
    case Datatype::qcint8:
      return 1;
    default:
      return 0;
  }
}

std::string Node::describe() const { return "node " + std::to_string(index) + " (" + node_type_name(type) + ")"; }

std::string Graph::describe_value(uint32_t index) const {
  if (index >= values.size()) return "value index " + std::to_string(index);
  const Value& value = values[index];
  return "value " + std::to_string(value.id) + " (" + datatype_name(value.datatype) + value.shape.to_string() + ")";
}

}  // namespace etna::xnn
