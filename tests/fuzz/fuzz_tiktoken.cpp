// Fuzzes the tiktoken.model reader (engine/tokenizer/tiktoken_file.h). A file is refused
// with an error naming it, or accepted with what the grammar promises: distinct non-empty
// tokens, every single byte among them.
#include <set>
#include <string>

#include "engine/tokenizer/tiktoken_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  auto tokens = tok::parse_tiktoken_model(fuzz::bytes(data, size), "tiktoken.model");
  if (!tokens.ok()) {
    fuzz::note(tokens.status().message());
    fuzz::check(tokens.status().message().find("tiktoken.model") != std::string::npos,
                "the error does not name the file: " + tokens.status().message());
    return 0;
  }
  std::set<std::string> seen;
  for (const std::string& t : *tokens) {
    fuzz::check(!t.empty(), "an empty token accepted");
    fuzz::check(seen.insert(t).second, "a token accepted twice");
  }
  for (int b = 0; b < 256; ++b)
    fuzz::check(seen.count(std::string(1, static_cast<char>(b))) == 1,
                "accepted without the single byte " + std::to_string(b));
  fuzz::note("accepted");
  return 0;
}
