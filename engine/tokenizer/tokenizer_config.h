// Reader for the special tokens in `tokenizer_config.json` (Hugging Face layout).
//
// The parts read (everything else is ignored):
//
//   {
//     "added_tokens_decoder": {                 // id (a decimal string) -> token
//       "163584": {"content": "[BOS]", "special": true, ...},
//       ...
//     },
//     "bos_token": "[BOS]",                     // a string, or {"content": "..."}
//     "eos_token": "<|end_of_msg|>"             // required; names a special token
//   }
//
// K3 reserves the 256 ids after the BPE ranks for specials (163584..163839); the file
// names some of them and the rest are "<|reserved_token_ID|>", as in the reference
// tokenizer. Every one of those ids is a special id whatever its "special" flag: K3 leaves
// <|close|> and <|sep|> unmarked (k3-model.md 9.1), and they are still single control ids.
// Errors name the file and the key, or the line and column of a JSON syntax error.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj::tok {

struct TokenizerConfig {
  std::map<int64_t, std::string> added_tokens;  // id -> content
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
};

// Parses the contents; `name` prefixes error messages. InvalidArgument or Corruption
// on failure.
Result<TokenizerConfig> parse_tokenizer_config(std::string_view contents, const std::string& name);

}  // namespace nj::tok
