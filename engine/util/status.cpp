// Status: names for codes, context chaining and the invariant-failure handler.
#include "engine/util/status.h"

namespace nj {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kIOError: return "I/O error";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kFailedPrecondition: return "failed precondition";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kNonFinite: return "non-finite numbers";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

void check_failed(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "nightjar: invariant failed at %s:%d: %s%s%s\n", file, line, expr,
               msg ? " — " : "", msg ? msg : "");
  std::abort();
}

}  // namespace nj
