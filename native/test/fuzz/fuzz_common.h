// Shared pieces of the fuzz targets: reading a file and zero-filled inputs
// that match a method's metadata.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/io.h"
#include "core/program_info.h"
#include "../fixtures.h"

namespace etna::fuzz {

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

using ::etna::test::testdata_dir;

// Backing storage and descriptions for one call with all-zero inputs.
struct ZeroInputs {
  std::vector<std::vector<uint8_t>> storage;
  std::vector<InputValue> values;
  bool usable = true;  // false when an input is too big or of a kind no caller can pass
};

// Tensors above this many bytes are not worth materialising in a fuzz run.
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 22;

inline ZeroInputs zero_inputs(const MethodInfo& method) {
  ZeroInputs out;
  out.values.reserve(method.inputs.size());
  out.storage.reserve(method.inputs.size());
  for (const ValueInfo& info : method.inputs) {
    InputValue value;
    if (info.kind == "tensor") {
      auto dtype = dtype_from_name(info.dtype);
      if (!dtype || info.nbytes > kMaxInputBytes) {
        out.usable = false;
        return out;
      }
      value.kind = InputValue::Kind::kTensor;
      value.tensor.dtype = *dtype;
      value.tensor.shape = info.shape;
      out.storage.emplace_back(static_cast<size_t>(info.nbytes));
      value.tensor.data = out.storage.back().data();
      value.tensor.nbytes = out.storage.back().size();
    } else if (info.kind == "int") {
      value.kind = InputValue::Kind::kInt;
    } else if (info.kind == "double") {
      value.kind = InputValue::Kind::kDouble;
    } else if (info.kind == "bool") {
      value.kind = InputValue::Kind::kBool;
    } else if (info.kind == "string") {
      value.kind = InputValue::Kind::kString;
    } else if (info.kind == "none") {
      value.kind = InputValue::Kind::kNone;
    } else {
      out.usable = false;
      return out;
    }
    out.values.push_back(std::move(value));
  }
  return out;
}

}  // namespace etna::fuzz
