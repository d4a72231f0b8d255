#include "embstore/common/status.h"

#include <cerrno>
#include <cstring>

namespace embstore {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kIOError:
      return "I/O error";
    case StatusCode::kOutOfRange:
      return "out of range";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kDeadlineExceeded:
      return "deadline exceeded";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kUnimplemented:
      return "unimplemented";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

Status Status::FromErrno(std::string_view what, int err) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  switch (err) {
    case ENOENT:
      return NotFound(std::move(msg));
    case EEXIST:
      return AlreadyExists(std::move(msg));
    case EACCES:
    case EPERM:
      return PermissionDenied(std::move(msg));
    default:
      return IOError(std::move(msg));
  }
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

}  // namespace embstore
