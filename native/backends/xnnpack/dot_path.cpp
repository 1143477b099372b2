#include "backends/xnnpack/dot_path.h"

#include <atomic>
#include <iterator>

#include "core/cpu_features.h"

namespace etna::xnn {
namespace {

// -1: no forced path.
std::atomic<int> forced_path{-1};

// Best first.
constexpr DotPath kPreference[] = {DotPath::kAvx512Vnni, DotPath::kAvx2, DotPath::kNeonI8mm,
                                   DotPath::kNeonDot,    DotPath::kNeon, DotPath::kScalar};

bool cpu_runs(DotPath path) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma;
  switch (path) {
    case DotPath::kScalar: return true;
    case DotPath::kAvx2: return avx2;
    case DotPath::kAvx512Vnni: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
    case DotPath::kNeon: return f.asimd;
    case DotPath::kNeonDot: return f.asimd && f.dotprod;
    // Single rows take the dot-product kernels on this path too.
    case DotPath::kNeonI8mm: return f.asimd && f.dotprod && f.i8mm;
  }
  return false;
}

DotPath best_available_path() {
  static const DotPath best = [] {
    for (DotPath path : kPreference) {
      if (cpu_runs(path)) return path;
    }
    return DotPath::kScalar;
  }();
  return best;
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
    case DotPath::kNeon: return "neon";
    case DotPath::kNeonDot: return "neon-dotprod";
    case DotPath::kNeonI8mm: return "neon-i8mm";
  }
  return "unknown";
}

bool dot_path_available(DotPath path) { return cpu_runs(path); }

std::vector<DotPath> available_dot_paths() {
  std::vector<DotPath> paths;
  for (auto it = std::rbegin(kPreference); it != std::rend(kPreference); ++it) {
    if (cpu_runs(*it)) paths.push_back(*it);
  }
  return paths;
}

void force_dot_path(DotPath path) { forced_path.store(static_cast<int>(path), std::memory_order_relaxed); }
void clear_forced_dot_path() { forced_path.store(-1, std::memory_order_relaxed); }

}  // namespace etna::xnn
