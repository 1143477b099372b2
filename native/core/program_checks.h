// Checks run while a Program loads: locating FlatBuffer damage, and the
// semantic rules the runtime depends on (indices, offsets, sizes, enums).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "status.h"

namespace etna {

class Program;

// Names the first table, vector or string that fails FlatBuffers verification
// and its byte offset; used only after the whole-buffer verifier has failed.
std::string locate_structure_error(const uint8_t* data, size_t size);

// Every rule of the format that later code relies on; the first violation is
// reported with the method, field, index and offending value.
Status check_program(const Program& program);

}  // namespace etna
