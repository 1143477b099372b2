// Errors as values: the core never throws for bad input. Every failure carries
// a stable code (mirrored by EtnaError.code in TypeScript) and a message that
// names what was wrong and where.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace etna {

enum class ErrorCode {
  kInvalidProgram,
  kUnsupportedOperator,
  kUnsupportedBackend,
  kMethodNotFound,
  kInvalidInput,
  kMemoryPlanConflict,
  kDisposed,
  kInternal,
};

// The string form used by EtnaError.code, e.g. "INVALID_PROGRAM".
const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  static Status ok() { return Status(); }

  bool is_ok() const { return !error_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

// A value of type T, or an Error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT
  Result(Error error) : state_(std::move(error)) {}  // NOLINT

  bool is_ok() const { return state_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<0>(state_); }
  const T& value() const { return std::get<0>(state_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(state_); }
  Status status() const { return is_ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> state_;
};

}  // namespace etna

// Propagates a failed Status from the current function.
#define ETNA_TRY(expr)                              \
  do {                                              \
    ::etna::Status etna_status_ = (expr);           \
    if (!etna_status_) return etna_status_.error(); \
  } while (0)
