// The instruction set etna's vector kernels run on, chosen once from what the
// CPU offers: AVX-512 VNNI (with AVX2 and FMA), AVX2 and FMA, or portable
// code. The integer dot products of dynamically quantized layers have kernels
// per path (dynamic_linear_kernels.h); the fp32 kernels ask only whether the
// path includes AVX2 and FMA.
#pragma once

#include <cstdint>

namespace etna::xnn {

enum class DotPath : uint8_t { kScalar, kAvx2, kAvx512Vnni };

// The path the CPU supports best, unless a test forced another.
DotPath active_dot_path();
const char* dot_path_name(DotPath path);
bool dot_path_available(DotPath path);
// Tests and benchmarks only: run every later call on `path` (must be available).
void force_dot_path(DotPath path);
void clear_forced_dot_path();
// Whether `path` includes AVX2 and FMA, which the fp32 etna kernels' vector code
// needs: every path but the portable one (VNNI is only chosen alongside them).
inline bool path_has_avx2(DotPath path) { return path != DotPath::kScalar; }

}  // namespace etna::xnn
