#include "backends/xnnpack/module_context.h"

#include <cstdint>
#include <cstring>

#include "backends/xnnpack/memory_plan.h"

namespace etna::xnn {

AlignedBuffer::AlignedBuffer(size_t bytes) {
  if (bytes > SIZE_MAX - kReadPadding) return;
  AlignedAllocation allocation = allocate_aligned(bytes + kReadPadding);
  if (!allocation.data) return;
  // Padding bytes are read (never used) by XNNPACK; keep them defined.
  std::memset(allocation.data.get() + bytes, 0, allocation.capacity - bytes);
  data_ = std::move(allocation.data);
  size_ = bytes;
}

Status Workspace::reserve(size_t bytes) {
  if (bytes <= buffer_.size() && buffer_.data()) return Status::ok();
  AlignedBuffer bigger(bytes);
  if (!bigger.data()) {
    return make_error(ErrorCode::kInternal,
                      "out of memory growing the XNNPACK workspace to " + std::to_string(bytes) + " bytes");
  }
  buffer_ = std::move(bigger);
  size_.store(bytes, std::memory_order_relaxed);
  return Status::ok();
}

Threadpool::Threadpool(int threads) {
  // pthreadpool counts the calling thread, so 1 thread means no pool at all.
  if (threads > 1) pool_.reset(pthreadpool_create(static_cast<size_t>(threads)));
}

size_t Threadpool::threads() const { return pool_ ? pthreadpool_get_threads_count(pool_.get()) : 1; }

XnnpackModuleContext::XnnpackModuleContext(const BackendOptions& options)
    : options_(options), threadpool_(std::make_shared<Threadpool>(options.num_threads)) {
  if (options_.share_workspace) shared_workspace_ = std::make_shared<Workspace>();
}

Result<std::shared_ptr<PackedOperator>> XnnpackModuleContext::packed_operator(const Graph& graph, const Node& node) {
  std::string key = PackedOperator::cache_key(graph, node);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = operators_.find(key);
  if (it != operators_.end()) {
    if (auto existing = it->second.lock()) {
      ++operators_reused_;
      return existing;
    }
  }
  auto created = PackedOperator::create(graph, node);
  if (!created) return created.error();
  std::shared_ptr<PackedOperator> shared(std::move(*created));
  operators_[std::move(key)] = shared;
  ++operators_created_;
  return shared;
}

Result<std::shared_ptr<const AlignedBuffer>> XnnpackModuleContext::constant_copy(const Value& value) {
  std::string key = value.constant_key + "/" + std::to_string(value.constant.size);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = constants_.find(key);
  if (it != constants_.end()) {
    if (auto existing = it->second.lock()) return existing;
  }
  auto copy = std::make_shared<AlignedBuffer>(value.constant.size);
  if (!copy->data()) {
    return make_error(ErrorCode::kInternal, "out of memory copying constant value " + std::to_string(value.id) + " (" +
                                                std::to_string(value.constant.size) + " bytes)");
  }
  if (value.constant.size) std::memcpy(copy->data(), value.constant.data, value.constant.size);
  constants_[std::move(key)] = copy;
  return std::shared_ptr<const AlignedBuffer>(copy);
}

std::shared_ptr<Workspace> XnnpackModuleContext::workspace_for_delegate() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shared_workspace_) return shared_workspace_;
  auto workspace = std::make_shared<Workspace>();
  // Forget workspaces whose delegates are gone.
  std::vector<std::weak_ptr<Workspace>> alive;
  for (auto& weak : delegate_workspaces_) {
    if (!weak.expired()) alive.push_back(std::move(weak));
  }
  alive.push_back(workspace);
  delegate_workspaces_ = std::move(alive);
  return workspace;
}

XnnpackStats XnnpackModuleContext::stats() const {
  XnnpackStats stats;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& entry : operators_) {
    if (auto op = entry.second.lock()) {
      ++stats.packed_operators;
      stats.packed_operator_bytes += op->packed_bytes();
    }
  }
  for (const auto& entry : constants_) {
    if (auto copy = entry.second.lock()) {
      ++stats.constant_copies;
      stats.constant_copy_bytes += copy->size();
    }
  }
  if (shared_workspace_) {
    stats.workspaces = 1;
    stats.workspace_bytes = shared_workspace_->size();
  } else {
    for (const auto& weak : delegate_workspaces_) {
      if (auto workspace = weak.lock()) {
        ++stats.workspaces;
        stats.workspace_bytes += workspace->size();
      }
    }
  }
  stats.operators_created = operators_created_;
  stats.operators_reused = operators_reused_;
  stats.allocation_metered = AllocationMeter::available();
  return stats;
}

BackendMemory XnnpackModuleContext::memory() const {
  const XnnpackStats s = stats();
  BackendMemory memory;
  // Weights the module holds in the form XNNPACK runs them: packed operator
  // weights plus constants XNNPACK reads in place (copied once with padding).
  memory.packed_weight_bytes = s.packed_operator_bytes + s.constant_copy_bytes;
  memory.workspace_bytes = s.workspace_bytes;
  return memory;
}

}  // namespace etna::xnn
