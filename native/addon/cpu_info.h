// `cpuInfo()`: the CPU's architecture and the features etna's vector kernels
// look for, and the path each kernel family chose from them (what
// `etna inspect --cpu` prints).
#pragma once

#include <napi.h>

namespace etna::addon {

void init_cpu_info(Napi::Env env, Napi::Object exports);

}  // namespace etna::addon
