// SHA-256 (FIPS 180-4), used to recognise identical constant bytes that carry
// no named-data key, so they are packed once per module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace etna::xnn {

// Lowercase hex digest of `size` bytes at `data`.
std::string sha256_hex(const uint8_t* data, size_t size);

}  // namespace etna::xnn
