// The instruction set etna's vector kernels run on, chosen once from what the
// CPU offers (core/cpu_features.h): on x86, AVX-512 VNNI (with AVX2 and FMA),
// AVX2 and FMA; on arm64, NEON with the 8-bit matrix multiplies (i8mm), NEON
// with the 8-bit dot products, plain NEON; else portable code. The integer
// dot products of dynamically quantized layers have kernels per path
// (dynamic_linear_kernels.h); the fp32 kernels ask only whether the path
// includes AVX2 and FMA.
#pragma once

#include <cstdint>
#include <vector>

namespace etna::xnn {

enum class DotPath : uint8_t { kScalar, kAvx2, kAvx512Vnni, kNeon, kNeonDot, kNeonI8mm };

// The path the CPU supports best, unless a test forced another.
DotPath active_dot_path();
const char* dot_path_name(DotPath path);
bool dot_path_available(DotPath path);
// Every path this CPU runs, the scalar one first: what tests compare.
std::vector<DotPath> available_dot_paths();
// Tests and benchmarks only: run every later call on `path` (must be available).
void force_dot_path(DotPath path);
void clear_forced_dot_path();
// Whether `path` includes AVX2 and FMA, which the fp32 etna kernels' x86
// vector code needs (VNNI is only chosen alongside them).
inline bool path_has_avx2(DotPath path) { return path == DotPath::kAvx2 || path == DotPath::kAvx512Vnni; }
// Whether `path` is one of the arm64 NEON ones, which the etna kernels' NEON
// transposes and matrix multiply run with.
inline bool path_has_neon(DotPath path) {
  return path == DotPath::kNeon || path == DotPath::kNeonDot || path == DotPath::kNeonI8mm;
}

}  // namespace etna::xnn
