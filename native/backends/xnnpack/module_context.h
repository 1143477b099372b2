// What one Module shares between all its XNNPACK delegate instances: packed
// operators and padded constant copies (keyed by content identity), the
// workspace for intermediates, and the thread pool.
//
// Delegates hold shared ownership of what they use, so the context may be
// destroyed before or after them; the maps here only observe (weak
// references), and an entry's memory goes with its last user.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/xnnpack/graph.h"
#include "backends/xnnpack/packed_operator.h"
#include "backends/xnnpack/xnn_library.h"
#include "backends/xnnpack/xnnpack_backend.h"
#include "core/aligned.h"
#include "core/backend.h"

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

class Threadpool {
 public:
  explicit Threadpool(int threads);
  pthreadpool_t get() const { return pool_.get(); }
  size_t threads() const;

 private:
  ThreadpoolPtr pool_;  // null runs on the calling thread
};

class XnnpackModuleContext final : public BackendModuleContext {
 public:
  explicit XnnpackModuleContext(const BackendOptions& options);

  BackendMemory memory() const override;
  XnnpackStats stats() const;
  const BackendOptions& options() const { return options_; }

  // The module's operator for this node, packing it on first use.
  Result<std::shared_ptr<PackedOperator>> packed_operator(const Graph& graph, const Node& node);
  // The module's padded copy of a constant value, made on first use.
  Result<std::shared_ptr<const AlignedBuffer>> constant_copy(const Value& value);
  // The shared workspace, or a new one of the delegate's own.
  std::shared_ptr<Workspace> workspace_for_delegate();
  std::shared_ptr<Threadpool> threadpool() const { return threadpool_; }

 private:
  const BackendOptions options_;
  std::shared_ptr<Threadpool> threadpool_;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<PackedOperator>> operators_;
  std::unordered_map<std::string, std::weak_ptr<const AlignedBuffer>> constants_;
  std::shared_ptr<Workspace> shared_workspace_;
  std::vector<std::weak_ptr<Workspace>> delegate_workspaces_;
  uint64_t operators_created_ = 0;
  uint64_t operators_reused_ = 0;
};

}  // namespace etna::xnn
