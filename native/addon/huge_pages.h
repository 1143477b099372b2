// `adviseHugePages(view)`: asks for huge pages for an ArrayBuffer not yet
// written, such as a new state snapshot of tens of MiB. A fresh ArrayBuffer
// that large takes one page fault per 4 KiB page the first time it is
// written, which on virtual machines costs far more than the writes (about
// 100 ms for 36 MiB, where the copy itself takes 2 ms); with huge pages it
// takes a few faults.
#pragma once

#include <napi.h>

namespace etna::addon {

void init_huge_pages(Napi::Env env, Napi::Object exports);

}  // namespace etna::addon
