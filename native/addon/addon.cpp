// Entry point of the etna addon: registers the native classes.
#include <napi.h>

#include "addon_data.h"
#include "program_wrap.h"

namespace etna::addon {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  env.SetInstanceData(new AddonData());
  ProgramWrap::init(env, exports);
  return exports;
}

}  // namespace etna::addon

NODE_API_MODULE(etna, etna::addon::init)
