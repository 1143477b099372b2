#include "huge_pages.h"

#include "convert.h"
#include "core/aligned.h"
#include "program_wrap.h"

namespace etna::addon {
namespace {

Napi::Value advise_huge_pages_of(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    const ByteSpan view = bytes_argument(info, "adviseHugePages");
    // Advice only: the bytes are neither read nor written.
    advise_huge_pages(const_cast<uint8_t*>(view.data), view.size);
    return env.Undefined();
  });
}

}  // namespace

void init_huge_pages(Napi::Env env, Napi::Object exports) {
  exports.Set("adviseHugePages", Napi::Function::New(env, advise_huge_pages_of, "adviseHugePages"));
}

}  // namespace etna::addon
