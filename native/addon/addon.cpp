// Entry point of the etna addon: registers the native classes.
#include <napi.h>

#include "addon_data.h"
#include "module_wrap.h"
#include "program_wrap.h"

namespace {

Napi::Object init_etna(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData(new etna::addon::AddonData());
  etna::addon::ProgramWrap::init(env, exports);
  etna::addon::ModuleWrap::init(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(etna, init_etna)
