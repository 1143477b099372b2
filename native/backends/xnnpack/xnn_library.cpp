#include "backends/xnnpack/xnn_library.h"

#include <cstdlib>
#include <mutex>

#include "backends/xnnpack/xnn_compat.h"
#include "core/aligned.h"

namespace etna::xnn {
namespace {

thread_local AllocationMeter* active_meter = nullptr;

void count(size_t bytes) {
  // Every enclosing meter sees the allocation too.
  if (active_meter) active_meter->add(bytes);
}

void* meter_allocate(void*, size_t size) {
  count(size);
  return std::malloc(size);
}
void* meter_reallocate(void*, void* pointer, size_t size) {
  count(size);
  return std::realloc(pointer, size);
}
void meter_deallocate(void*, void* pointer) { std::free(pointer); }
// XNNPACK's aligned blocks are its packed weights and runtime buffers: taken
// from the runtime's allocator, so that large ones go back to the OS when
// freed (core/aligned.h says why malloc does not ensure that).
void* meter_aligned_allocate(void*, size_t alignment, size_t size) {
  count(size);
  return allocate_aligned_block(size, alignment, false);
}
void meter_aligned_deallocate(void*, void* pointer) { free_aligned_block(pointer); }

const xnn_allocator kMeteringAllocator = {
    nullptr, meter_allocate, meter_reallocate, meter_deallocate, meter_aligned_allocate, meter_aligned_deallocate,
};

// Immutable after the first call: the process-wide init result and whether
// our allocator was the one XNNPACK adopted.
std::once_flag init_once;
xnn_status init_status = xnn_status_uninitialized;
bool meter_installed = false;

}  // namespace

Status ensure_xnnpack_initialized() {
  std::call_once(init_once, [] {
    init_status = xnn_initialize(&kMeteringAllocator);
    if (init_status != xnn_status_success) return;
    // XNNPACK keeps the first allocator it was given; probe whether it is ours.
    AllocationMeter probe;
    xnn_operator_t op = nullptr;
    if (compat::create_probe_operator(&op) == xnn_status_success) xnn_delete_operator(op);
    meter_installed = probe.bytes() > 0;
  });
  if (init_status != xnn_status_success) return xnnpack_error("XNNPACK initialisation", "xnn_initialize", init_status);
  return Status::ok();
}

bool AllocationMeter::available() { return meter_installed; }

AllocationMeter::AllocationMeter() : outer_(active_meter) { active_meter = this; }

AllocationMeter::~AllocationMeter() {
  active_meter = outer_;
  if (outer_) outer_->add(bytes_);
}

std::string status_name(xnn_status status) {
  switch (status) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid_parameter";
    case xnn_status_invalid_state: return "invalid_state";
    case xnn_status_unsupported_parameter: return "unsupported_parameter";
    case xnn_status_unsupported_hardware: return "unsupported_hardware";
    case xnn_status_out_of_memory: return "out_of_memory";
    default:  // statuses newer releases added
      break;
  }
  return "status " + std::to_string(static_cast<int>(status));
}

Error xnnpack_error(const std::string& where, const char* call, xnn_status status, ErrorCode code) {
  if (status == xnn_status_unsupported_parameter || status == xnn_status_unsupported_hardware) {
    code = ErrorCode::kUnsupportedOperator;
  }
  return make_error(code, where + ": " + call + " failed (" + status_name(status) + ")");
}

}  // namespace etna::xnn
