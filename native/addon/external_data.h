// `describeExternalData(bytes)`: the tensors a .ptd file holds, read by the
// runtime's own DataMap parser (what a module loading the file would accept).
#pragma once

#include <napi.h>

namespace etna::addon {

void init_external_data(Napi::Env env, Napi::Object exports);

}  // namespace etna::addon
