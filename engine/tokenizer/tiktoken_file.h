// Reader for `tiktoken.model`, the mergeable ranks of a tiktoken vocabulary.
//
// Grammar (one token per line, ranks in file order; K3's file has 163,584 lines):
//
//   file   := line*
//   line   := base64 SP+ rank EOL | EOL          (blank lines are skipped)
//   base64 := standard alphabet, '=' padding      (the token's bytes, non-empty)
//   rank   := decimal digits                      (0, 1, 2, ... : the token id)
//   EOL    := "\n" | "\r\n" | end of file
//
// Rank r must sit on the r-th non-blank line: a rank that repeats or skips one is an
// error naming the line, as is a line that does not parse (the first such line is
// reported). Token bytes must be distinct (a repeat names both lines), and every single
// byte 0x00..0xFF must be a token (so that any byte string can be encoded).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/util/status.h"

namespace nj::tok {

// Parses the contents of a tiktoken.model file; `name` prefixes error messages
// ("tiktoken.model:12: ..."). Returns the tokens in rank order, or Corruption.
Result<std::vector<std::string>> parse_tiktoken_model(std::string_view contents,
                                                      const std::string& name);

// Standard base64 (RFC 4648 §4, padding required). nullopt on any other character.
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace nj::tok
