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

namespace {

bool json_output = false;   // --output json
bool json_printed = false;  // an object went to stdout already

// With --output json and nothing printed yet: the error object.
void print_error_json(int exit_code, const std::string& message) {
  if (json_output && !json_printed) print_json({{"error", error_json(exit_code, message)}});
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char buf[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

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
