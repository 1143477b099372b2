#include "status.h"

namespace etna {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidProgram: return "INVALID_PROGRAM";
    case ErrorCode::kUnsupportedOperator: return "UNSUPPORTED_OPERATOR";
    case ErrorCode::kUnsupportedBackend: return "UNSUPPORTED_BACKEND";
    case ErrorCode::kMethodNotFound: return "METHOD_NOT_FOUND";
    case ErrorCode::kInvalidInput: return "INVALID_INPUT";
    case ErrorCode::kMemoryPlanConflict: return "MEMORY_PLAN_CONFLICT";
    case ErrorCode::kDisposed: return "DISPOSED";
    case ErrorCode::kInternal: return "INTERNAL";
  }
  return "INTERNAL";
}

}  // namespace etna
