#include "backends/xnnpack/module_context.h"

#include <algorithm>
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

Result<WorkspaceLease> WorkspaceSource::acquire(size_t bytes) const {
  WorkspaceLease lease;
  if (pool_) {
    auto borrowed = pool_->borrow([](const Workspace&) { return true; },
                                  []() -> Result<std::shared_ptr<Workspace>> { return std::make_shared<Workspace>(); });
    if (!borrowed) return borrowed.error();
    lease = std::move(*borrowed);
  } else {
    lease = WorkspaceLease(own_);
  }
  ETNA_TRY(lease->reserve(bytes));
  if (need_) {
    size_t seen = need_->load(std::memory_order_relaxed);
    while (seen < bytes && !need_->compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
  }
  return lease;
}

XnnpackModuleContext::XnnpackModuleContext(const BackendOptions& options)
    : options_(options),
      thread_pool_(options.pool ? options.pool
                                : ThreadPools::process().acquire(static_cast<size_t>(std::max(options.num_threads, 1)),
                                                                 options.thread_pool)) {}

namespace {

// Makes a padded copy of a constant value's bytes.
Result<std::shared_ptr<const AlignedBuffer>> padded_copy(const Value& value) {
  auto copy = std::make_shared<AlignedBuffer>(value.constant.size);
  if (!copy->data()) {
    return make_error(ErrorCode::kInternal, "out of memory copying constant value " + std::to_string(value.id) + " (" +
                                                std::to_string(value.constant.size) + " bytes)");
  }
  if (value.constant.size) std::memcpy(copy->data(), value.constant.data, value.constant.size);
  return std::shared_ptr<const AlignedBuffer>(std::move(copy));
}

std::string constant_key(const Value& value) { return value.constant_key + "/" + std::to_string(value.constant.size); }

}  // namespace

Result<std::shared_ptr<ProgramShared<PackedOperator>>> XnnpackProgramContext::packed_operator(
    const std::string& key, const Graph& graph, const Node& node, NanHandling handling, bool& created,
    pthreadpool_t pool) {
  created = false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = operators_.find(key);
  if (it != operators_.end()) {
    if (auto existing = it->second.lock()) return existing;
  }
  auto packed = PackedOperator::create(graph, node, handling, pool);
  if (!packed) return packed.error();
  auto entry = std::make_shared<ProgramShared<PackedOperator>>(std::shared_ptr<PackedOperator>(std::move(*packed)));
  operators_[key] = entry;
  ++operators_created_;
  created = true;
  return entry;
}

Result<std::shared_ptr<ProgramShared<const AlignedBuffer>>> XnnpackProgramContext::constant_copy(const std::string& key,
                                                                                                 const Value& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = constants_.find(key);
  if (it != constants_.end()) {
    if (auto existing = it->second.lock()) return existing;
  }
  auto copy = padded_copy(value);
  if (!copy) return copy.error();
  auto entry = std::make_shared<ProgramShared<const AlignedBuffer>>(std::move(*copy));
  constants_[key] = entry;
  return entry;
}

std::shared_ptr<const ParsedPayload> XnnpackProgramContext::checked_payload(ByteSpan payload) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = payloads_.find({payload.data, payload.size});
  return it == payloads_.end() ? nullptr : it->second;
}

namespace {

// A cheap digest of a list for finding equal ones: its size and up to 64 of
// its values, spread over it. Equality is then checked value by value.
uint64_t sample_digest(const ScaleList& scales) {
  uint64_t digest = 1469598103934665603ull ^ scales.size();
  const size_t step = std::max<size_t>(1, scales.size() / 64);
  for (size_t i = 0; i < scales.size(); i += step) {
    uint32_t bits;
    std::memcpy(&bits, scales.data() + i, sizeof bits);
    digest = (digest ^ bits) * 1099511628211ull;
  }
  return digest;
}

}  // namespace

ScaleList XnnpackProgramContext::shared_scales(const ScaleList& scales) {
  // Called with mutex_ held.
  if (scales.empty()) return scales;
  auto& candidates = scale_lists_[sample_digest(scales)];
  for (const ScaleList& known : candidates) {
    // A list the program already holds (each packed operator's key asks again) is not compared value by value.
    if (known.identity() == scales.identity()) return known;
    if (known.size() == scales.size() && std::memcmp(known.data(), scales.data(), scales.size() * sizeof(float)) == 0) {
      return known;
    }
  }
  candidates.push_back(scales);
  return scales;
}

std::string XnnpackProgramContext::cache_key(const Graph& graph, const Node& node, NanHandling handling) {
  std::lock_guard<std::mutex> lock(mutex_);
  return PackedOperator::cache_key(graph, node, handling,
                                   [this](const ScaleList& scales) { return shared_scales(scales).identity(); });
}

void XnnpackProgramContext::remember_checked_payload(ByteSpan payload, ParsedPayload parsed) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Value& value : parsed.graph.values) value.quant.channel_scales = shared_scales(value.quant.channel_scales);
  payloads_.emplace(std::make_pair(payload.data, payload.size),
                    std::make_shared<const ParsedPayload>(std::move(parsed)));
}

uint64_t XnnpackProgramContext::operators_created() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return operators_created_;
}

template <typename T, typename Share>
Result<std::shared_ptr<T>> XnnpackModuleContext::use(std::unordered_map<std::string, std::weak_ptr<ModuleUse<T>>>& uses,
                                                     const std::shared_ptr<XnnpackProgramContext>& program,
                                                     const std::string& key, Share share) {
  // Called with mutex_ held.
  XnnpackProgramContext* source = program.get();
  if (!source) {
    source = &own_program();
  } else if (std::find(programs_.begin(), programs_.end(), program) == programs_.end()) {
    programs_.push_back(program);
  }
  // The program's address keeps keys of different programs apart.
  const std::string module_key = std::to_string(reinterpret_cast<uintptr_t>(source)) + "/" + key;
  auto it = uses.find(module_key);
  if (it != uses.end()) {
    if (auto existing = it->second.lock()) return std::shared_ptr<T>(existing, existing->get());
  }
  auto entry = share(*source);
  if (!entry) return entry.error();
  auto module_use = std::make_shared<ModuleUse<T>>(std::move(*entry));
  uses[module_key] = module_use;
  // Aliasing: the delegate points at the value and owns the module's use.
  return std::shared_ptr<T>(module_use, module_use->get());
}

Result<std::shared_ptr<PackedOperator>> XnnpackModuleContext::packed_operator(
    const std::shared_ptr<XnnpackProgramContext>& program, const Graph& graph, const Node& node, NanHandling handling) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string key = (program ? *program : own_program()).cache_key(graph, node, handling);
  bool created = false;
  // Packing computes on the module's pool, as a call does, so its workers sleep once it is done.
  const ThreadPool::Call packing(thread_pool_.get());
  auto result = use(operators_, program, key, [&](XnnpackProgramContext& source) {
    return source.packed_operator(key, graph, node, handling, created, thread_pool_ ? thread_pool_->get() : nullptr);
  });
  if (result) ++(created ? operators_created_ : operators_reused_);
  return result;
}

Result<std::shared_ptr<const AlignedBuffer>> XnnpackModuleContext::constant_copy(
    const std::shared_ptr<XnnpackProgramContext>& program, const Value& value) {
  const std::string key = constant_key(value);
  std::lock_guard<std::mutex> lock(mutex_);
  return use(constants_, program, key, [&](XnnpackProgramContext& source) { return source.constant_copy(key, value); });
}

XnnpackProgramContext& XnnpackModuleContext::own_program() {
  if (!own_program_) own_program_ = std::make_shared<XnnpackProgramContext>();
  return *own_program_;
}

WorkspaceSource XnnpackModuleContext::workspace_for_delegate(const std::shared_ptr<XnnpackProgramContext>& program) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (options_.share_workspace) {
    return WorkspaceSource((program ? *program : own_program()).workspace_pool(), pooled_need_);
  }
  auto workspace = std::make_shared<Workspace>();
  // Forget workspaces whose delegates are gone.
  std::vector<std::weak_ptr<Workspace>> alive;
  for (auto& weak : delegate_workspaces_) {
    if (!weak.expired()) alive.push_back(std::move(weak));
  }
  alive.push_back(workspace);
  delegate_workspaces_ = std::move(alive);
  return WorkspaceSource(std::move(workspace));
}

XnnpackStats XnnpackModuleContext::stats() const {
  XnnpackStats stats;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& entry : operators_) {
    if (auto op = entry.second.lock()) {
      ++stats.packed_operators;
      stats.packed_operator_bytes += op->get()->packed_bytes();
      if (op->used_by_other_modules()) stats.shared_packed_operator_bytes += op->get()->packed_bytes();
    }
  }
  for (const auto& entry : constants_) {
    if (auto copy = entry.second.lock()) {
      ++stats.constant_copies;
      stats.constant_copy_bytes += copy->get()->size();
      if (copy->used_by_other_modules()) stats.shared_constant_copy_bytes += copy->get()->size();
    }
  }
  for (const auto& weak : delegate_workspaces_) {
    if (auto workspace = weak.lock()) {
      ++stats.workspaces;
      stats.workspace_bytes += workspace->size();
    }
  }
  stats.pooled_workspace_bytes = pooled_need_->load(std::memory_order_relaxed);
  stats.workspace_bytes += stats.pooled_workspace_bytes;
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
  memory.shared_packed_weight_bytes = s.shared_packed_operator_bytes + s.shared_constant_copy_bytes;
  memory.workspace_bytes = s.workspace_bytes;
  memory.pooled_workspace_bytes = s.pooled_workspace_bytes;
  return memory;
}

}  // namespace etna::xnn
