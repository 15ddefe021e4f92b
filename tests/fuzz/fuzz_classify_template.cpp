// Fuzzes classification prompt templates (jobs/prompt_template.h).
//
// Input := labels "\n" template        labels: separated by '|' (the first line)
//
// A template is refused with a message, or expanded with the suffix's trailing whitespace
// removed, as the grammar says; expanding the same template twice gives the same text.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "jobs/spec/prompt_template.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  const std::string input(fuzz::bytes(data, size));
  const size_t nl = input.find('\n');
  const std::string first = nl == std::string::npos ? "" : input.substr(0, nl);
  const std::string text = nl == std::string::npos ? input : input.substr(nl + 1);
  std::vector<std::string> labels;
  for (size_t at = 0; !first.empty() && at <= first.size();) {
    const size_t bar = std::min(first.find('|', at), first.size());
    labels.push_back(first.substr(at, bar - at));
    at = bar + 1;
  }
  auto expanded = jobs::expand_template(text, labels);
  if (!expanded.ok()) {
    fuzz::note(expanded.status().message());
    fuzz::check(!expanded.status().message().empty(), "an error without a message");
    return 0;
  }
  const std::string& suffix = expanded->suffix;
  fuzz::check(suffix.empty() || !std::isspace(static_cast<unsigned char>(suffix.back())),
              "the suffix keeps trailing whitespace");
  auto again = jobs::expand_template(text, labels);
  fuzz::check(again.ok() && again->prefix == expanded->prefix && again->suffix == suffix,
              "expanding twice differs");
  fuzz::note("accepted");
  return 0;
}
