#include "backends/xnnpack/dot_path.h"

#include <atomic>
#include <initializer_list>

namespace etna::xnn {
namespace {

// -1: no forced path.
std::atomic<int> forced_path{-1};

// Whether the CPU (and, for AVX-512, the OS's saved register state: the
// compiler's CPU check requires both) runs `path`. The one place that asks
// the CPU.
bool cpu_runs(DotPath path) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  switch (path) {
    case DotPath::kScalar: return true;
    case DotPath::kAvx2: return avx2;
    case DotPath::kAvx512Vnni: return vnni;
  }
  return false;
#else
  return path == DotPath::kScalar;
#endif
}

DotPath best_available_path() {
  for (DotPath path : {DotPath::kAvx512Vnni, DotPath::kAvx2}) {
    if (cpu_runs(path)) return path;
  }
  return DotPath::kScalar;
}

}  // namespace

DotPath active_dot_path() {
  const int forced = forced_path.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<DotPath>(forced) : best_available_path();
}

const char* dot_path_name(DotPath path) {
  switch (path) {
    case DotPath::kScalar: return "scalar";
    case DotPath::kAvx2: return "avx2";
    case DotPath::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool dot_path_available(DotPath path) { return cpu_runs(path); }

void force_dot_path(DotPath path) { forced_path.store(static_cast<int>(path), std::memory_order_relaxed); }
void clear_forced_dot_path() { forced_path.store(-1, std::memory_order_relaxed); }

}  // namespace etna::xnn
