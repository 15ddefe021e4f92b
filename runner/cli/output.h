// How commands print: human text by default, one JSON object with --output json.
// Diagnostics always go to stderr through spdlog, so stdout stays machine-readable.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "runner/store/printable.h"  // printable(), used by every command

namespace nj::runner {

enum class OutputFormat { kText, kJson };

// Parses "text" or "json".
Result<OutputFormat> parse_output_format(const std::string& name);

// Writes one JSON object and a newline to stdout, flushed.
void print_json(const nlohmann::json& j);

// Says that the command runs with `--output json` (set by the command line before the
// command runs): a failure then still prints exactly one JSON object on stdout,
// {"error": {"code": EXIT_CODE, "message": TEXT}}, unless the command printed its own.
// Not thread-safe: the command line's thread only.
void set_json_output(bool on);

// The inner error object of a failure that ends with `exit_code`: {"code", "message"}.
nlohmann::json error_json(int exit_code, const std::string& message);

// Logs a failed Status at error level ("nightjar: <message>") and returns its exit code;
// with --output json also prints error_json when nothing was printed yet.
int report_failure(const Status& s);

// Refuses two flags given together where the command would silently ignore one of them:
// logs "FLAG: does not go with OTHER (WHY)" (WHY may be empty) and returns the usage exit
// code (2); with --output json as report_failure.
int report_conflict(const std::string& flag, const std::string& other, const std::string& why);

// Logs a bad command-line value ("nightjar: --memory: invalid size 'x' ...") and returns
// the usage exit code (2); with --output json as report_failure.
int report_usage_error(const std::string& flag, const Status& s);

}  // namespace nj::runner
