// What the CPU offers etna's vector kernels, asked once: the one place that
// asks (x86: the compiler's CPU checks, which also require the OS to save the
// registers; arm64 Linux: the kernel's hardware capability words). Each kernel
// family picks its path from these (dot_path.h, attention.h).
#pragma once

#include <vector>

namespace etna {

struct CpuFeatures {
  // x86
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false;
  // arm64: NEON, the 8-bit dot products (sdot/udot), the 8-bit matrix
  // multiplies (smmla/ummla/usmmla, usdot)
  bool asimd = false, dotprod = false, i8mm = false;
};

const CpuFeatures& cpu_features();
// The architecture etna was built for: "x64", "arm64" or "other" (Node's names).
const char* cpu_architecture();
// The names of the features above that the CPU has, in declaration order.
std::vector<const char*> cpu_feature_names();

}  // namespace etna
