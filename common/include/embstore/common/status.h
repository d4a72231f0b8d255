// Status and Result<T>: how every fallible embstore call reports failure.
//
// A Status is either OK or carries a code and a human-readable message. The message always names
// the thing that failed (a file, a table, a request) and says what was expected and what was found.
// OK costs nothing: no allocation, one byte of code and an empty string.
//
// Result<T> holds either a value or a non-OK Status. Both types are [[nodiscard]]; propagate with
// EMBSTORE_RETURN_NOT_OK and EMBSTORE_ASSIGN_OR_RETURN. Exceptions never cross these APIs: they are
// caught at the edges (main(), the Python binding, wrappers around libraries that throw).
//
// Thread safety: values; copying and reading from several threads is safe.
#ifndef EMBSTORE_COMMON_STATUS_H_
#define EMBSTORE_COMMON_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace embstore {

enum class StatusCode : unsigned char {
  kOk = 0,
  kInvalidArgument,     // the caller asked for something malformed (bad flag, bad row range)
  kNotFound,            // a file, table or key does not exist
  kAlreadyExists,       // refusing to replace something that exists
  kCorruption,          // a file's bytes contradict the format (docs/FORMAT.md)
  kIOError,             // the operating system refused a read, write, map or rename
  kOutOfRange,          // a row index or value past what the data holds
  kUnavailable,         // a peer cannot be reached right now; retrying may help
  kCancelled,           // the caller cancelled
  kDeadlineExceeded,    // a deadline passed
  kPermissionDenied,    // authenticated but not allowed
  kUnauthenticated,     // no or wrong credentials
  kResourceExhausted,   // a configured limit was hit
  kFailedPrecondition,  // the system is not in a state where this can run
  kUnimplemented,
  kInternal,  // a bug in embstore
};

// Stable lower-case name of a code, e.g. "corruption".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status Unauthenticated(std::string m) {
    return {StatusCode::kUnauthenticated, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  // Builds an IOError from errno, e.g. IOErrorFromErrno("open 'x.emb'", errno) ->
  // "open 'x.emb': No such file or directory". ENOENT maps to NotFound, EEXIST to AlreadyExists,
  // EACCES/EPERM to PermissionDenied.
  static Status FromErrno(std::string_view what, int err);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  bool IsNotFound() const { return code_ == StatusCode::kNotFound; }
  bool IsCorruption() const { return code_ == StatusCode::kCorruption; }

  // "corruption: <message>", or "ok".
  std::string ToString() const;

  // A copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK Status");
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(v_); }

  // Preconditions: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace embstore

#define EMBSTORE_CONCAT_INNER_(a, b) a##b
#define EMBSTORE_CONCAT_(a, b) EMBSTORE_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define EMBSTORE_RETURN_NOT_OK(expr)             \
  do {                                           \
    ::embstore::Status _embstore_st = (expr);    \
    if (!_embstore_st.ok()) return _embstore_st; \
  } while (0)

#define EMBSTORE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()

// Evaluates `expr` (a Result<T>); on error returns its Status, else assigns the value to `lhs`
// (which may be a declaration: EMBSTORE_ASSIGN_OR_RETURN(auto table, Table::Open(path))).
#define EMBSTORE_ASSIGN_OR_RETURN(lhs, expr) \
  EMBSTORE_ASSIGN_OR_RETURN_IMPL_(EMBSTORE_CONCAT_(_embstore_res_, __LINE__), lhs, expr)

#endif  // EMBSTORE_COMMON_STATUS_H_
