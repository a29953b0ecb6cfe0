// Status and StatusOr<T>: how every fallible weightlift call reports failure.
//
// No exceptions cross the library API. A Status carries a category (the
// StatusCode) and, for checkpoint-format violations, the exact rule that was
// broken (FormatError), plus a message that names the file, the tensor, the
// offsets and errno or the CUDA error name.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "weightlift/format_error.h"

namespace weightlift {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller asked for something impossible
  kNotFound,           // a file, shard or tensor does not exist
  kCorruption,         // the bytes break the safetensors format
  kIoError,            // a system call failed or came back short
  kUnsupported,        // a backend or feature is unavailable here
  kResourceExhausted,  // out of host or device memory, or a limit was hit
  kCudaError,          // the CUDA runtime or driver failed
  kCancelled,          // stopped because another part of the load failed
  kInternal,           // a bug in weightlift
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message,
         FormatError rule = FormatError::kNone)
      : code_(code), rule_(rule), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) {
    return {StatusCode::kNotFound, std::move(m)};
  }
  // A format violation always names the rule it broke.
  static Status Corruption(FormatError rule, std::string m) {
    return {StatusCode::kCorruption, std::move(m), rule};
  }
  static Status IoError(std::string m) {
    return {StatusCode::kIoError, std::move(m)};
  }
  // errno-carrying I/O error: appends strerror(err) and the errno name.
  static Status IoErrorFromErrno(std::string m, int err);
  static Status Unsupported(std::string m) {
    return {StatusCode::kUnsupported, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status CudaError(std::string m) {
    return {StatusCode::kCudaError, std::move(m)};
  }
  static Status Cancelled(std::string m) {
    return {StatusCode::kCancelled, std::move(m)};
  }
  static Status Internal(std::string m) {
    return {StatusCode::kInternal, std::move(m)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  FormatError rule() const { return rule_; }
  const std::string& message() const { return message_; }
  // "Corruption [overlapping_ranges]: model.safetensors: tensor 'x' ..."
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; code and rule kept.
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  FormatError rule_ = FormatError::kNone;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // STATUS must be an error. An OK status here is a bug in the caller; it
  // becomes an Internal error (in every build, not only with asserts on),
  // so no caller ever sees ok() without a value.
  StatusOr(Status status)  // NOLINT: implicit
      : v_(status.ok()
               ? Status::Internal("StatusOr built from an OK status (a bug: no "
                                  "value was given)")
               : std::move(status)) {}
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace weightlift

#define WL_CONCAT_INNER(a, b) a##b
#define WL_CONCAT(a, b) WL_CONCAT_INNER(a, b)

#define WL_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::weightlift::Status wl_status_ = (expr); \
    if (!wl_status_.ok()) return wl_status_;  \
  } while (0)

#define WL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define WL_ASSIGN_OR_RETURN(lhs, expr) \
  WL_ASSIGN_OR_RETURN_IMPL(WL_CONCAT(wl_statusor_, __LINE__), lhs, expr)
