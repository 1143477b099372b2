// The XNNPACK delegate ("XnnpackBackend"): runs ExecuTorch XNNPACK payloads
// on the XNNPACK release the system provides (Debian's 2022 build).
//
// Per program (one BackendProgramContext): packed weights and padded
// constants are created once and shared by every module, delegate instance
// and method that uses the same constant. Per module (one BackendModuleContext):
// delegate intermediates live in one workspace when options.share_workspace
// is set, and XNNPACK work runs on a pool of options.num_threads threads.
#pragma once

#include <cstdint>
#include <optional>

#include "core/backend.h"

namespace etna {

const Backend& xnnpack_backend();

// Detail behind BackendModuleContext::memory(), for tests and benchmarks.
struct XnnpackStats {
  uint64_t packed_operators = 0;              // live XNNPACK operators holding packed weights
  uint64_t packed_operator_bytes = 0;         // bytes XNNPACK allocated for them
  uint64_t shared_packed_operator_bytes = 0;  // of which other modules over the program use too
  uint64_t operators_created = 0;             // packings this module did over its life
  uint64_t operators_reused = 0;              // times it used an existing packing (its own or another module's) instead
  uint64_t constant_copies = 0;               // live padded constant copies (operands XNNPACK reads unpacked)
  uint64_t constant_copy_bytes = 0;
  uint64_t shared_constant_copy_bytes = 0;  // of which other modules over the program use too
  uint64_t workspaces = 0;                  // the module's own: one per delegate instance, none when pooled
  uint64_t workspace_bytes = 0;             // own workspaces plus the pooled need
  uint64_t pooled_workspace_bytes = 0;      // the largest workspace its delegates borrowed from the program's pool
  bool allocation_metered = false;          // packed bytes measured (false: estimated from constant sizes)
};

// Stats of a context created by xnnpack_backend(); nullopt for any other.
std::optional<XnnpackStats> xnnpack_stats(const BackendModuleContext& context);

}  // namespace etna
