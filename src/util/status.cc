#include "weightlift/status.h"

#include <cstring>

#include "util/errno_text.h"

namespace weightlift {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kUnsupported:
      return "Unsupported";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kCudaError:
      return "CudaError";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status Status::IoErrorFromErrno(std::string m, int err) {
  m += ": ";
  m += internal::ErrnoText(err);
  return {StatusCode::kIoError, std::move(m)};
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s = StatusCodeName(code_);
  if (rule_ != FormatError::kNone) {
    s += " [";
    s += FormatErrorName(rule_);
    s += "]";
  }
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_, rule_);
}

}  // namespace weightlift
