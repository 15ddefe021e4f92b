// Status and Result<T>: how expected failures travel through Nightjar.
//
// Bad input, missing files, short reads and full disks are not bugs; they are returned
// as a Status carrying a code and a message with its context ("model.safetensors:
// tensor 'x' ends past the file ..."). Exceptions thrown by third-party libraries are
// caught in the one adapter that uses the library and converted here. Invariants
// (bugs) are guarded with NJ_CHECK, which aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace nj {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is malformed (flag, spec, config value)
  kNotFound,          // a file, tensor, job or key that should exist does not
  kCorruption,        // a file exists but its contents fail validation
  kIOError,           // the operating system reported a failure (read, write, fsync)
  kResourceExhausted, // a budget, a disk or a limit is too small
  kFailedPrecondition,// the request is valid but the state does not allow it
  kCancelled,         // stopped on request (signal, deadline)
  kInternal,          // a bug surfaced as an error rather than a crash
  kNonFinite,         // the arithmetic produced NaN or infinity (weights or config out of
                      // range); deterministic, so retrying gives the same
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<code name>: <message>", or "OK".
  std::string to_string() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status non_finite(std::string m) { return {StatusCode::kNonFinite, std::move(m)}; }

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                      // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {                // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const char* msg);

}  // namespace nj

// Invariant guard: aborts with the expression and location. Not for expected failures.
#define NJ_CHECK(cond)                                                  \
  do {                                                                  \
    if (!(cond)) ::nj::check_failed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
#define NJ_CHECK_MSG(cond, msg)                                      \
  do {                                                               \
    if (!(cond)) ::nj::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)

#define NJ_CONCAT_INNER(a, b) a##b
#define NJ_CONCAT(a, b) NJ_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if it is not OK.
#define NJ_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::nj::Status nj_status_ = (expr);       \
    if (!nj_status_.ok()) return nj_status_; \
  } while (0)

// NJ_ASSIGN_OR_RETURN(auto x, make_x()): binds the value or returns the Status.
#define NJ_ASSIGN_OR_RETURN(lhs, expr) NJ_ASSIGN_OR_RETURN_IMPL(NJ_CONCAT(nj_result_, __LINE__), lhs, expr)
#define NJ_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
