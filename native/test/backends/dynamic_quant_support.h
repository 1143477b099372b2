// What the dynamic-quantization tests share: XNNPACK's qd8 conversion for
// their references, the dot-product paths to run on, and the checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend_test_support.h"
#include "backends/xnnpack/dynamic_linear.h"

namespace etna::test {

// real[i] = scale * (q[i] - zero_point), as XNNPACK (November 2024 on)
// quantizes a row: the range [min(0, lo), max(0, hi)] mapped onto [-128, 127]
// by the multiplier m = 255 / (hi - lo), which also converts the row
// (q = round(x * m), ties to even); the zero point rounded the same way; the
// scale 1 / m.
inline std::vector<double> qd8_dequantized(const float* x, size_t count) {
  float lo = 0, hi = 0;
  for (size_t i = 0; i < count; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  const float multiplier = lo == hi ? 1.0f : 255.0f / (hi - lo);
  const float zero_from_min = -128.0f - lo * multiplier, zero_from_max = 127.0f - hi * multiplier;
  float zero = (-128.0f + lo * multiplier) + (127.0f + hi * multiplier) > 0 ? zero_from_min : zero_from_max;
  zero = std::min(std::max(zero, -128.0f), 127.0f);
  const int zp = static_cast<int>(std::nearbyint(zero));
  const float scale = 1.0f / multiplier;
  std::vector<double> real(count);
  for (size_t i = 0; i < count; ++i) {
    float v = x[i] * multiplier;
    v = std::min(std::max(v, static_cast<float>(-128 - zp)), static_cast<float>(127 - zp));
    real[i] = static_cast<double>(scale) * std::nearbyint(v);
  }
  return real;
}

// Initialises `payload` and runs it once on `path` with `x` as input 0 (of
// `input_sizes`) into output 1 (of `output_sizes`); the output values.
inline std::vector<float> run_on_path(const std::vector<uint8_t>& payload, const PayloadBuilder& b,
                                      std::vector<int64_t> input_sizes, const std::vector<float>& x,
                                      std::vector<int64_t> output_sizes, xnn::DotPath path) {
  xnn::XnnpackModuleContext context(BackendOptions{});
  auto delegate = make_delegate(payload, context, b.lookup());
  EXPECT_TRUE(delegate) << (delegate ? "" : delegate.error().message);
  if (!delegate) return {};
  LocalTensor input(ScalarType::kFloat, std::move(input_sizes));
  input.fill(x);
  LocalTensor output(ScalarType::kFloat, std::move(output_sizes));
  xnn::force_dot_path(path);
  Status ran = run_delegate(**delegate, {&input, &output});
  xnn::clear_forced_dot_path();
  EXPECT_TRUE(ran) << (ran ? "" : ran.error().message);
  return output.to_vector();
}

// `run` on every path: close to `expected`, and bit-identical across paths.
inline void expect_same_on_every_path(const std::function<std::vector<float>(xnn::DotPath)>& run,
                                      const std::vector<float>& expected, float tolerance) {
  std::vector<float> first;
  for (xnn::DotPath path : xnn::available_dot_paths()) {
    SCOPED_TRACE(xnn::dot_path_name(path));
    const auto actual = run(path);
    EXPECT_TRUE(close_to(actual, expected, tolerance));
    if (first.empty()) {
      first = actual;
    } else {
      ASSERT_EQ(actual.size(), first.size());
      EXPECT_EQ(0, std::memcmp(actual.data(), first.data(), actual.size() * sizeof(float)))
          << "path " << xnn::dot_path_name(path) << " differs from the first path";
    }
  }
}

inline void expect_rejected(const Error& error, ErrorCode code, std::initializer_list<const char*> parts) {
  EXPECT_EQ(error.code, code) << error.message;
  for (const char* part : parts) EXPECT_NE(error.message.find(part), std::string::npos) << error.message;
}

}  // namespace etna::test
