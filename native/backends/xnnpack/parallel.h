// How the XNNPACK delegate's etna kernels split their work over the module's
// thread pool: the rules of core/parallel.h, shared with the portable
// kernels, under the names these kernels have always used.
#pragma once

#include "core/parallel.h"

namespace etna::xnn {

using etna::block_size;
using etna::divide_up;
using etna::fine_split_forced;
using etna::force_fine_split;
using etna::kMinTaskBytes;
using etna::kMinTaskElements;
using etna::kMinTaskFloatMacs;
using etna::kMinTaskIntegerMacs;
using etna::kPoolFlags;
using etna::kTasksPerThread;
using etna::parallel_for;
using etna::parallel_for_2d;
using etna::pool_for;
using etna::pool_threads;
using etna::task_count;

}  // namespace etna::xnn
