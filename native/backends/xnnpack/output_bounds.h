// fp32 output bounds (a node's output_min/output_max) applied as PyTorch's
// clamp applies them: NaN stays NaN, every other value is held within the
// bounds, and -0 stays -0 at a bound of 0. etna kernels clamp with
// these; the linked (2022) XNNPACK's own clamps turn NaN into the lower bound.
#pragma once

#include <cmath>
#include <cstddef>

namespace etna::xnn {

// Whether the bounds clamp anything: a finite lower or upper bound.
inline bool has_finite_bound(float lo, float hi) { return lo > -INFINITY || hi < INFINITY; }

inline float clamp_keeping_nan(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

inline void clamp_keeping_nan(float* data, size_t count, float lo, float hi) {
  for (size_t i = 0; i < count; ++i) data[i] = clamp_keeping_nan(data[i], lo, hi);
}

}  // namespace etna::xnn
