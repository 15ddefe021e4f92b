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

int report_failure(const Status& s) {
  spdlog::error("{}", s.message());
  const int code = exit_code_for(s);
  print_error_json(code, s.message());
  return code;
}

int report_usage_error(const std::string& flag, const Status& s) {
  spdlog::error("{}: {}", flag, s.message());
  print_error_json(kExitUsage, flag + ": " + s.message());
  return kExitUsage;
}

}  // namespace nj::runner
