// Output helpers shared by the commands.
#include "runner/cli/output.h"

#include <cstdio>
#include <iostream>

#include <spdlog/spdlog.h>

#include "runner/cli/exit_codes.h"

namespace nj::runner {

Result<OutputFormat> parse_output_format(const std::string& name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  return invalid_argument("--output must be 'text' or 'json', not '" + name + "'");
}

namespace {

bool json_output = false;   // --output json
bool json_printed = false;  // an object went to stdout already

// With --output json and nothing printed yet: the error object.
void print_error_json(int exit_code, const std::string& message) {
  if (json_output && !json_printed) print_json({{"error", error_json(exit_code, message)}});
}

}  // namespace

void print_json(const nlohmann::json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
  json_printed = true;
}

void set_json_output(bool on) {
  json_output = on;
}

nlohmann::json error_json(int exit_code, const std::string& message) {
  return {{"code", exit_code}, {"message", message}};
}

namespace {

// One error line per line of `message` (a validation lists one problem per line), so that
// every line carries the "nightjar: error:" prefix.
void log_error_lines(const std::string& message) {
  for (size_t start = 0;;) {
    const size_t end = message.find('\n', start);
    spdlog::error("{}", message.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) return;
    start = end + 1;
  }
}

}  // namespace

int report_failure(const Status& s) {
  log_error_lines(s.message());
  const int code = exit_code_for(s);
  print_error_json(code, s.message());
  return code;
}

int report_usage_error(const std::string& flag, const Status& s) {
  log_error_lines(flag + ": " + s.message());
  print_error_json(kExitUsage, flag + ": " + s.message());
  return kExitUsage;
}

int report_conflict(const std::string& flag, const std::string& other, const std::string& why) {
  return report_usage_error(
      flag, invalid_argument("does not go with " + other + (why.empty() ? "" : " (" + why + ")")));
}

}  // namespace nj::runner
