// expand_template: the classification template grammar (see prompt_template.h).
#include "jobs/spec/prompt_template.h"

#include <cctype>
#include <optional>

namespace nj::jobs {
namespace {

// "line L, column C" (1-based) of byte `offset` inside the template.
std::string position_in(const std::string& text, size_t offset) {
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

}  // namespace

Result<ExpandedTemplate> expand_template(const std::string& text,
                                         const std::vector<std::string>& labels) {
  std::string joined;
  for (size_t i = 0; i < labels.size(); ++i) joined += (i ? ", " : "") + labels[i];
  std::string before, after;
  std::optional<size_t> document_at;
  std::string* out = &before;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        *out += '}';
        ++i;
        continue;
      }
      return invalid_argument("unmatched '}' at " + position_in(text, i) +
                              " (write }} for a literal brace)");
    }
    if (c != '{') {
      *out += c;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      *out += '{';
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && is_name_char(text[end])) ++end;
    if (end >= text.size() || text[end] != '}' || end == i + 1)
      return invalid_argument("unmatched '{' at " + position_in(text, i) +
                              " (placeholders are {document} and {labels}; write {{ for a "
                              "literal brace)");
    const std::string name = text.substr(i + 1, end - i - 1);
    if (name == "labels") {
      *out += joined;
    } else if (name == "document") {
      if (document_at)
        return invalid_argument("{document} appears twice (at " + position_in(text, *document_at) +
                                " and " + position_in(text, i) + "); it must appear exactly once");
      document_at = i;
      out = &after;
    } else {
      return invalid_argument("unknown placeholder '{" + name + "}' at " + position_in(text, i) +
                              " (known: {document}, {labels}; write {{ for a literal brace)");
    }
    i = end;
  }
  if (!document_at)
    return invalid_argument(
        "the template has no {document} placeholder (it must say where each document goes, "
        "exactly once)");
  while (!after.empty() && std::isspace(static_cast<unsigned char>(after.back()))) after.pop_back();
  return ExpandedTemplate{std::move(before), std::move(after)};
}

}  // namespace nj::jobs
