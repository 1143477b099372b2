// Each kernel family's paths follow the CPU's features: the ones this CPU
// runs are listed (the portable one first, the best last), the active one is
// the best, and no other architecture's path is offered. The lists are
// recorded as test properties, so a run's XML report shows which paths the
// other tests compared on this CPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/nan_keeping_kernels.h"
#include "core/cpu_features.h"
#include "kernels/attention.h"

namespace etna::test {
namespace {

using xnn::DotPath;

template <typename Path, typename Name>
std::string joined(const std::vector<Path>& paths, Name name) {
  std::string text;
  for (Path path : paths) text += (text.empty() ? "" : " ") + std::string(name(path));
  return text;
}

TEST(KernelPaths, DotProductPathsFollowTheCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  const std::vector<DotPath> paths = xnn::available_dot_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), DotPath::kScalar);
  EXPECT_EQ(xnn::active_dot_path(), paths.back());
  for (DotPath path : paths) EXPECT_TRUE(xnn::dot_path_available(path)) << xnn::dot_path_name(path);
  const bool avx2 = f.avx2 && f.fma;
  EXPECT_EQ(xnn::dot_path_available(DotPath::kAvx2), avx2);
  EXPECT_EQ(xnn::dot_path_available(DotPath::kAvx512Vnni),
            avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  EXPECT_EQ(xnn::dot_path_available(DotPath::kNeon), f.asimd);
  EXPECT_EQ(xnn::dot_path_available(DotPath::kNeonDot), f.asimd && f.dotprod);
  EXPECT_EQ(xnn::dot_path_available(DotPath::kNeonI8mm), f.asimd && f.dotprod && f.i8mm);
  RecordProperty("dot_paths", joined(paths, xnn::dot_path_name));
}

TEST(KernelPaths, FeaturesBelongToTheBuildsArchitecture) {
  const CpuFeatures& f = cpu_features();
  const bool x86 = f.avx2 || f.fma || f.avx512f || f.avx512bw || f.avx512vl || f.avx512vnni;
  const bool arm = f.asimd || f.dotprod || f.i8mm;
  const std::string arch = cpu_architecture();
  if (arch == "arm64") {
    EXPECT_TRUE(f.asimd) << "every arm64 CPU Linux runs on has NEON";
    EXPECT_FALSE(x86);
  } else {
    EXPECT_FALSE(arm);
  }
  std::string names;
  for (const char* name : cpu_feature_names()) names += (names.empty() ? "" : " ") + std::string(name);
  RecordProperty("cpu_features", arch + ": " + names);
}

TEST(KernelPaths, AttentionAndScanPathsFollowTheCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  const std::vector<kernels::AttentionPath> paths = kernels::available_attention_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), kernels::AttentionPath::kPortable);
  EXPECT_EQ(kernels::active_attention_path(), paths.back());
  const std::string best = kernels::attention_path_name(paths.back());
  EXPECT_EQ(best, f.avx2 ? "avx2" : f.asimd ? "neon" : "portable");
  EXPECT_EQ(std::string(xnn::float_specials_path()), f.avx2 ? "avx2" : f.asimd ? "neon" : "scalar");
  RecordProperty("attention_paths", joined(paths, kernels::attention_path_name));
}

}  // namespace
}  // namespace etna::test
