// Fuzzes the tokenizer_config.json reader (engine/tokenizer/tokenizer_config.h). A file is
// refused with an error naming it, or accepted with every added token's content non-empty.
#include <string>

#include "engine/tokenizer/tokenizer_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nj;
  auto config = tok::parse_tokenizer_config(fuzz::bytes(data, size), "tokenizer_config.json");
  if (!config.ok()) {
    fuzz::note(config.status().message());
    fuzz::check(config.status().message().find("tokenizer_config.json") != std::string::npos,
                "the error does not name the file: " + config.status().message());
    return 0;
  }
  for (const auto& [id, content] : config->added_tokens)
    fuzz::check(id >= 0 && !content.empty(),
                "added token " + std::to_string(id) + " accepted empty");
  fuzz::note("accepted");
  return 0;
}
