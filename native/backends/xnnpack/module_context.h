// What the modules of one Program share (XnnpackProgramContext: packed
// operators and padded constant copies, keyed by content identity, and the
// pool of workspaces lent per call), and what one Module shares between all
// its XNNPACK delegate instances (XnnpackModuleContext: its view of those,
// where its delegates' workspaces come from, and the thread pool its calls use).
//
// Delegates hold shared ownership of what they use, so either context may be
// destroyed before or after them; the maps here only observe (weak
// references), and an entry's memory goes with its last user.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/packed_operator.h"
#include "backends/xnnpack/payload.h"
#include "backends/xnnpack/xnn_library.h"
#include "backends/xnnpack/xnnpack_backend.h"
#include "core/aligned.h"
#include "core/backend.h"
#include "core/memory.h"
#include "core/thread_pool.h"

namespace etna::xnn {

// 64-byte-aligned bytes with kReadPadding spare bytes behind them.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Empty (data() == nullptr) when the allocation fails.
  explicit AlignedBuffer(size_t bytes);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t, AlignedFree> data_;
  size_t size_ = 0;
};

// Scratch memory for intermediates. Grows, never shrinks; holds nothing
// between calls. Only the module's running call (it holds the module's call
// lease) reserves and uses it; size() may be read from any thread.
class Workspace {
 public:
  Status reserve(size_t bytes);
  uint8_t* data() const { return buffer_.data(); }
  size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  AlignedBuffer buffer_;
  std::atomic<size_t> size_{0};  // buffer_.size(), published for memory reports
};

// The workspaces of one program's modules that borrow them per call.
using WorkspacePool = LendingPool<Workspace>;
using WorkspaceLease = WorkspacePool::Lease;

// Where a delegate's workspace comes from: one of its own, or the program's
// pool, borrowed for one call and given back when the lease ends (a
// workspace holds nothing between calls, so any free one will do).
class WorkspaceSource {
 public:
  WorkspaceSource() = default;
  explicit WorkspaceSource(std::shared_ptr<Workspace> own) : own_(std::move(own)) {}
  // `need` records the largest workspace borrowed, for memory reports.
  WorkspaceSource(std::shared_ptr<WorkspacePool> pool, std::shared_ptr<std::atomic<size_t>> need)
      : pool_(std::move(pool)), need_(std::move(need)) {}
  // The workspace for one call, at least `bytes` large.
  Result<WorkspaceLease> acquire(size_t bytes) const;

 private:
  std::shared_ptr<Workspace> own_;
  std::shared_ptr<WorkspacePool> pool_;
  std::shared_ptr<std::atomic<size_t>> need_;
};

// A value every module over one program may use, with the number of modules
// that use it now (for reporting what a module shares).
template <typename T>
struct ProgramShared {
  explicit ProgramShared(std::shared_ptr<T> shared_value) : value(std::move(shared_value)) {}
  const std::shared_ptr<T> value;
  std::atomic<uint32_t> modules{0};
};

// One module's use of a ProgramShared value: counted while it lives.
template <typename T>
class ModuleUse {
 public:
  explicit ModuleUse(std::shared_ptr<ProgramShared<T>> entry) : entry_(std::move(entry)) { ++entry_->modules; }
  ~ModuleUse() { --entry_->modules; }
  ModuleUse(const ModuleUse&) = delete;
  ModuleUse& operator=(const ModuleUse&) = delete;
  T* get() const { return entry_->value.get(); }
  bool used_by_other_modules() const { return entry_->modules.load() > 1; }

 private:
  std::shared_ptr<ProgramShared<T>> entry_;
};

// Per Program: what its modules share. Packing happens under the mutex, so
// modules loading at once over one program pack each operator once.
class XnnpackProgramContext final : public BackendProgramContext {
 public:
  // The program's operator for this node (key: PackedOperator::cache_key),
  // packing it when no module holds it.
  // `created` tells whether this call packed it.
  // `pool`: where etna's own packing may split its work (null: the caller alone).
  Result<std::shared_ptr<ProgramShared<PackedOperator>>> packed_operator(const std::string& key, const Graph& graph,
                                                                         const Node& node, NanHandling handling,
                                                                         bool& created, pthreadpool_t pool);
  // The operator's cache key, naming each scale list by the program's list of
  // equal values (kept for the program's life, so no other list takes its place).
  std::string cache_key(const Graph& graph, const Node& node, NanHandling handling);
  // The program's padded copy of a constant value, made when no module holds it.
  Result<std::shared_ptr<ProgramShared<const AlignedBuffer>>> constant_copy(const std::string& key, const Value& value);
  // Packings done over the program's life.
  uint64_t operators_created() const;
  // The payload at `payload` (one of this program's) as an earlier delegate
  // parsed and checked it; null when none has. Later modules copy it instead
  // of parsing, hashing and checking the payload again. A remembered payload's
  // scale lists are the program's list of equal values where one exists
  // (prefill and decode carry the same weights' scales in payloads of their own).
  std::shared_ptr<const ParsedPayload> checked_payload(ByteSpan payload) const;
  void remember_checked_payload(ByteSpan payload, ParsedPayload parsed);
  // Workspaces lent per call to delegates of modules that pool them.
  const std::shared_ptr<WorkspacePool>& workspace_pool() const { return workspace_pool_; }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<ProgramShared<PackedOperator>>> operators_;
  std::unordered_map<std::string, std::weak_ptr<ProgramShared<const AlignedBuffer>>> constants_;
  uint64_t operators_created_ = 0;
  // Keyed by where the payload lies in the program's bytes, which never move.
  std::map<std::pair<const uint8_t*, size_t>, std::shared_ptr<const ParsedPayload>> payloads_;
  // The scale lists of the payloads remembered, one per content, by a sample of their values.
  std::unordered_map<uint64_t, std::vector<ScaleList>> scale_lists_;
  ScaleList shared_scales(const ScaleList& scales);
  const std::shared_ptr<WorkspacePool> workspace_pool_ = std::make_shared<WorkspacePool>();
};

class XnnpackModuleContext final : public BackendModuleContext {
 public:
  explicit XnnpackModuleContext(const BackendOptions& options);

  BackendMemory memory() const override;
  XnnpackStats stats() const;
  const BackendOptions& options() const { return options_; }

  // The operator for this node, from `program` (null: a program context of
  // this module's own, for delegates made without a program), packing it
  // only when no module over the program holds it.
  Result<std::shared_ptr<PackedOperator>> packed_operator(const std::shared_ptr<XnnpackProgramContext>& program,
                                                          const Graph& graph, const Node& node, NanHandling handling);
  // The padded copy of a constant value, from `program` likewise.
  Result<std::shared_ptr<const AlignedBuffer>> constant_copy(const std::shared_ptr<XnnpackProgramContext>& program,
                                                             const Value& value);
  // The program's pool (`program`, or this module's own program context when
  // null) when the module pools workspaces (share_workspace), else a new
  // workspace of the delegate's own.
  WorkspaceSource workspace_for_delegate(const std::shared_ptr<XnnpackProgramContext>& program);
  // The pool calls compute on, from the process's pools (options.num_threads,
  // options.thread_pool); null when calls run on the calling thread alone.
  // Delegates hold it too: XNNPACK runtimes keep the pool they were made with.
  const std::shared_ptr<ThreadPool>& thread_pool() const { return thread_pool_; }

 private:
  const BackendOptions options_;
  const std::shared_ptr<ThreadPool> thread_pool_;

  // Finds or adds this module's use of a program's value; `share` gets the
  // value from the program. Delegates receive a pointer that keeps the use alive.
  template <typename T, typename Share>
  Result<std::shared_ptr<T>> use(std::unordered_map<std::string, std::weak_ptr<ModuleUse<T>>>& uses,
                                 const std::shared_ptr<XnnpackProgramContext>& program, const std::string& key,
                                 Share share);

  mutable std::mutex mutex_;
  // Program contexts this module used: held so their addresses (part of the
  // keys below) stay unique.
  std::vector<std::shared_ptr<XnnpackProgramContext>> programs_;
  std::shared_ptr<XnnpackProgramContext> own_program_;
  std::unordered_map<std::string, std::weak_ptr<ModuleUse<PackedOperator>>> operators_;
  std::unordered_map<std::string, std::weak_ptr<ModuleUse<const AlignedBuffer>>> constants_;
  XnnpackProgramContext& own_program();  // made on first use; with mutex_ held
  // Pooling: the largest workspace its delegates borrowed.
  const std::shared_ptr<std::atomic<size_t>> pooled_need_ = std::make_shared<std::atomic<size_t>>(0);
  std::vector<std::weak_ptr<Workspace>> delegate_workspaces_;
  uint64_t operators_created_ = 0;
  uint64_t operators_reused_ = 0;
};

}  // namespace etna::xnn
