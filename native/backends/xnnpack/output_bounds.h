// fp32 output bounds (a node's output_min/output_max) applied as PyTorch's
// clamp applies them: NaN stays NaN, every other value is held within the
// bounds. The linked (2022) XNNPACK clamps every fp32 output with max and
// min instructions even when both bounds are infinite, and those turn NaN
// into the lower bound (NaN + 1 came out as -Infinity). So etna gives
// XNNPACK no fp32 bounds: the nodes whose XNNPACK kernels clamp run as etna's
// own kernels (own_kernels.h), and packed fp32 operators are created
// unbounded and finished here (packed_operator.cpp).
#pragma once

#include <cmath>
#include <cstddef>

namespace etna::xnn {

// Whether the bounds clamp anything: a finite lower or upper bound.
inline bool has_finite_bound(float lo, float hi) { return lo > -INFINITY || hi < INFINITY; }

// x within [lo, hi], NaN kept. -0 stays -0 at a bound of 0, as in the
// portable relu and clamp kernels.
inline float clamp_keeping_nan(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

inline void clamp_keeping_nan(float* data, size_t count, float lo, float hi) {
  for (size_t i = 0; i < count; ++i) data[i] = clamp_keeping_nan(data[i], lo, hi);
}

}  // namespace etna::xnn
