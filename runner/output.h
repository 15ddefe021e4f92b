// How commands print: human text by default, one JSON object with --output json.
// Diagnostics always go to stderr through spdlog, so stdout stays machine-readable.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"

namespace nj::runner {

enum class OutputFormat { kText, kJson };

// Parses "text" or "json".
Result<OutputFormat> parse_output_format(const std::string& name);

// Writes one JSON object and a newline to stdout, flushed.
void print_json(const nlohmann::json& j);

// Logs a failed Status at error level ("nightjar: <message>") and returns its exit code.
int report_failure(const Status& s);

// Logs a bad command-line value ("nightjar: --memory: invalid size 'x' ...") and returns
// the usage exit code (2).
int report_usage_error(const std::string& flag, const Status& s);

}  // namespace nj::runner
