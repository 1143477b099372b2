// What the attention kernel tests share: forcing a vector path (and the
// finest split over threads) for one scope, and comparing outputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/attention.h"

namespace etna::kernel_test {

// An attention path, and optionally the finest split, for one scope.
class ForcedAttention {
 public:
  ForcedAttention(kernels::AttentionPath path, bool fine_split) {
    kernels::force_attention_path(path);
    force_fine_split(fine_split);
  }
  ~ForcedAttention() {
    kernels::clear_forced_attention_path();
    force_fine_split(false);
  }
  ForcedAttention(const ForcedAttention&) = delete;
  ForcedAttention& operator=(const ForcedAttention&) = delete;
};

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// NaN where the reference has NaN, the same infinity where it has one, and
// within `tolerance` elsewhere.
inline void expect_matches(const std::vector<float>& actual, const std::vector<float>& expected, float tolerance,
                           const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      ASSERT_TRUE(std::isnan(actual[i])) << what << ": element " << i << " is " << actual[i] << ", expected NaN";
    } else if (std::isinf(expected[i])) {
      ASSERT_EQ(actual[i], expected[i]) << what << ": element " << i;
    } else {
      ASSERT_NEAR(actual[i], expected[i], tolerance) << what << ": element " << i;
    }
  }
}

}  // namespace etna::kernel_test
