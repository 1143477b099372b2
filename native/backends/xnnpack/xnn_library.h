// Thin C++ layer over the linked XNNPACK C library: one-time initialisation,
// owning handles, status names, and a meter that counts what XNNPACK
// allocates (how packed-weight bytes are measured).
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"

namespace etna::xnn {

// Calls xnn_initialize exactly once per process (thread-safe) with etna's
// metering allocator; later calls return the first result.
Status ensure_xnnpack_initialized();

// "invalid_parameter" etc.; the 2022 library has no xnn_status_to_string.
std::string status_name(xnn_status status);

// Error naming the XNNPACK call and its status. Unsupported parameters or
// hardware map to UNSUPPORTED_OPERATOR, everything else to `code`.
Error xnnpack_error(const std::string& where, const char* call, xnn_status status,
                    ErrorCode code = ErrorCode::kInternal);

struct SubgraphDeleter {
  void operator()(xnn_subgraph* subgraph) const { xnn_delete_subgraph(subgraph); }
};
struct RuntimeDeleter {
  void operator()(xnn_runtime* runtime) const { xnn_delete_runtime(runtime); }
};
struct OperatorDeleter {
  void operator()(xnn_operator* op) const { xnn_delete_operator(op); }
};
using SubgraphPtr = std::unique_ptr<xnn_subgraph, SubgraphDeleter>;
using RuntimePtr = std::unique_ptr<xnn_runtime, RuntimeDeleter>;
using OperatorPtr = std::unique_ptr<xnn_operator, OperatorDeleter>;

// While alive, counts the bytes XNNPACK allocates on this thread (creating an
// operator allocates its packed weights). Nests; thread-local, so modules
// initialising on other threads are not counted.
class AllocationMeter {
 public:
  AllocationMeter();
  ~AllocationMeter();
  AllocationMeter(const AllocationMeter&) = delete;
  AllocationMeter& operator=(const AllocationMeter&) = delete;

  size_t bytes() const { return bytes_; }
  // False when another component initialised XNNPACK first with its own
  // allocator, so nothing can be counted.
  static bool available();

  void add(size_t bytes) { bytes_ += bytes; }

 private:
  size_t bytes_ = 0;
  AllocationMeter* outer_ = nullptr;
};

// Bytes XNNPACK may read past the end of any buffer it reads.
constexpr size_t kReadPadding = 64;  // XNN_EXTRA_BYTES is 16 in the 2022 and 2024 releases; newer ones may use more
static_assert(XNN_EXTRA_BYTES <= kReadPadding, "this XNNPACK reads further past buffers than etna pads them");

}  // namespace etna::xnn
