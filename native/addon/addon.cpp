// Entry point of the etna addon: registers the native classes.
#include <napi.h>

#include "addon_data.h"
#include "backends/registry.h"
#include "cpu_info.h"
#include "external_data.h"
#include "huge_pages.h"
#include "kernels/registry.h"
#include "module_wrap.h"
#include "program_wrap.h"

namespace {

Napi::Object init_etna(Napi::Env env, Napi::Object exports) {
  // The runtime's registries are process-wide; repeated inits (workers) add nothing.
  etna::kernels::register_portable_kernels();
  etna::backends::register_xnnpack_backend();
  auto* data = new etna::addon::AddonData();
  data->call_runner = etna::addon::CallRunner::create(env);
  env.SetInstanceData(data);
  etna::addon::ProgramWrap::init(env, exports);
  etna::addon::ModuleWrap::init(env, exports);
  etna::addon::init_external_data(env, exports);
  etna::addon::init_huge_pages(env, exports);
  etna::addon::init_cpu_info(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(etna, init_etna)
