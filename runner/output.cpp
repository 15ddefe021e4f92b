// Output helpers shared by the commands.
#include "runner/output.h"

#include <cstdio>
#include <iostream>

#include <spdlog/spdlog.h>

#include "runner/exit_codes.h"

namespace nj::runner {

Result<OutputFormat> parse_output_format(const std::string& name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  return invalid_argument("--output must be 'text' or 'json', not '" + name + "'");
}

void print_json(const nlohmann::json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
}

int report_failure(const Status& s) {
  spdlog::error("{}", s.message());
  return exit_code_for(s);
}

int report_usage_error(const std::string& flag, const Status& s) {
  spdlog::error("{}: {}", flag, s.message());
  return kExitUsage;
}

}  // namespace nj::runner
