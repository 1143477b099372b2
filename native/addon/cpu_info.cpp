#include "cpu_info.h"

#include <vector>

#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/nan_keeping_kernels.h"
#include "convert.h"
#include "core/cpu_features.h"
#include "kernels/attention.h"

namespace etna::addon {
namespace {

Napi::Value cpu_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    Napi::Object result = Napi::Object::New(env);
    result.Set("arch", cpu_architecture());
    const std::vector<const char*> names = cpu_feature_names();
    Napi::Array features = Napi::Array::New(env, names.size());
    for (size_t i = 0; i < names.size(); ++i) features.Set(static_cast<uint32_t>(i), names[i]);
    result.Set("features", features);
    const xnn::DotPath dot_path = xnn::active_dot_path();
    Napi::Object paths = Napi::Object::New(env);
    paths.Set("dynamicLinear", xnn::dot_path_name(dot_path));
    paths.Set("attention", kernels::attention_path_name(kernels::active_attention_path()));
    paths.Set("nanScan", xnn::float_specials_path());
    // The fp32 etna kernels follow the dot-product path's instruction set.
    const char* data_path = xnn::path_has_avx2(dot_path) ? "avx2" : xnn::path_has_neon(dot_path) ? "neon" : "scalar";
    paths.Set("transposes", data_path);
    paths.Set("matmul", data_path);
    paths.Set("fp32Functions", data_path);
    result.Set("paths", paths);
    return result;
  });
}

}  // namespace

void init_cpu_info(Napi::Env env, Napi::Object exports) {
  exports.Set("cpuInfo", Napi::Function::New(env, cpu_info, "cpuInfo"));
}

}  // namespace etna::addon
