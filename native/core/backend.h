// Delegate backends: a registry keyed by BackendDelegate.id ("XnnpackBackend").
// The runtime owns the registry; backend libraries add to it
// (backends::register_xnnpack_backend) before the first method loads.
//
// A backend turns a delegate payload into a handle once, when a method loads,
// and runs it on every DelegateCall. State that should exist once per Module
// (scratch workspace, its hold on a thread pool) lives in a BackendModuleContext that the
// Module creates once per backend and hands to every init. State that should
// exist once per Program (weights in the backend's own form, which every
// Module over the program can share) lives in a BackendProgramContext that
// the Program makes on the first request (Program::backend_context).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "evalue.h"
#include "profile.h"
#include "status.h"
#include "thread_pool.h"

namespace etna {

class Program;

struct CompileSpecView {
  std::string_view key;
  ByteSpan value;
};

// Module-wide options a backend may use.
struct BackendOptions {
  // The most threads one call may compute on, the caller included (1: the
  // caller alone); the pool they come from (thread_pool.h).
  int num_threads = 1;
  ThreadPoolKind thread_pool = ThreadPoolKind::kShared;
  // The module's pool when it holds one (num_threads > 1): backends compute
  // on it rather than take another, so a module with a pool of its own has
  // one, whatever runs its operators. Null: the backend takes one itself.
  std::shared_ptr<ThreadPool> pool;
  // Workspaces borrowed per call from the program's pool (shareMemoryArenas
  // on); otherwise one of its own per delegate instance.
  bool share_workspace = false;
};

// Bytes a backend holds for a module, for memoryReport().
struct BackendMemory {
  uint64_t packed_weight_bytes = 0;         // weights this module uses, shared with other modules or not
  uint64_t shared_packed_weight_bytes = 0;  // the part of packed_weight_bytes other modules use too
  uint64_t workspace_bytes = 0;             // scratch the module uses, its own plus pooled
  uint64_t pooled_workspace_bytes = 0;      // the part borrowed per call from the program's pool
};

// Per-Program, per-backend state. Lives as long as the Program and every
// module context that holds it; must be safe to use from several threads.
class BackendProgramContext {
 public:
  virtual ~BackendProgramContext() = default;
};

// Per-Module, per-backend shared state. Lives as long as the Module.
class BackendModuleContext {
 public:
  virtual ~BackendModuleContext() = default;
  virtual BackendMemory memory() const = 0;
};

// One initialised delegate instance (one BackendDelegate entry of one method).
class DelegateHandle {
 public:
  virtual ~DelegateHandle() = default;
  // `args` are the DelegateCall's values: inputs then outputs. When `profile`
  // is not null, the delegate records each stage it runs as a kStage event
  // (the caller has opened the DelegateCall's event around it).
  virtual Status execute(EValue* const* args, size_t count, ProfileRecorder* profile) = 0;
  Status execute(EValue* const* args, size_t count) { return execute(args, count, nullptr); }
  // How many arguments (inputs plus outputs) the payload declares, when it
  // says: a DelegateCall with another count is refused when the method loads.
  virtual std::optional<size_t> argument_count() const { return std::nullopt; }
};

// Errors from init and execute start with the method and delegate they concern
// (from DelegateInitContext), e.g. "method 'forward', delegate 0 (XnnpackBackend): ...".
struct DelegateInitContext {
  const Program& program;                // named_data lookups
  BackendModuleContext* module_context;  // from Backend::create_module_context
  std::string method_name;               // for messages
  size_t delegate_index = 0;             // for messages
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view id() const = 0;
  virtual std::unique_ptr<BackendModuleContext> create_module_context(const BackendOptions& options) const = 0;
  // The state this backend shares between modules of one program; null when
  // it shares nothing.
  virtual std::shared_ptr<BackendProgramContext> create_program_context() const { return nullptr; }
  virtual Result<std::unique_ptr<DelegateHandle>> init(ByteSpan payload, const std::vector<CompileSpecView>& specs,
                                                       DelegateInitContext& context) const = 0;
};

// Adds `backend` (which must outlive every Module) to the process-wide
// registry. Serialised; registering an id that is already there is a no-op,
// so the addon's init may run once per worker thread.
void register_backend(const Backend& backend);

// The registered backend with this id; nullptr when unknown.
const Backend* find_backend(std::string_view id);

// The registered ids for messages, in registration order: "XnnpackBackend",
// "A, B", or "none".
std::string registered_backend_ids();

}  // namespace etna
