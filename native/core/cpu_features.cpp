#include "core/cpu_features.h"

#include <utility>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
// The bits of AT_HWCAP and AT_HWCAP2 (Linux's asm/hwcap.h), spelled out for
// C libraries whose headers predate them.
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

namespace etna {
namespace {

CpuFeatures ask_cpu() {
  CpuFeatures f;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  f.asimd = (hwcap & HWCAP_ASIMD) != 0;
  f.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
  f.i8mm = (hwcap2 & HWCAP2_I8MM) != 0;
#elif defined(__aarch64__)
  f.asimd = true;  // every AArch64 CPU a general-purpose OS runs on has NEON
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = ask_cpu();
  return features;
}

const char* cpu_architecture() {
#if defined(__x86_64__)
  return "x64";
#elif defined(__aarch64__)
  return "arm64";
#else
  return "other";
#endif
}

std::vector<const char*> cpu_feature_names() {
  const CpuFeatures& f = cpu_features();
  const std::pair<bool, const char*> all[] = {
      {f.avx2, "avx2"},         {f.fma, "fma"},           {f.avx512f, "avx512f"},
      {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"}, {f.avx512vnni, "avx512vnni"},
      {f.asimd, "asimd"},       {f.dotprod, "asimddp"},   {f.i8mm, "i8mm"}};
  std::vector<const char*> names;
  for (const auto& [has, name] : all) {
    if (has) names.push_back(name);
  }
  return names;
}

}  // namespace etna
