// Vocabularies for the tokenizer tests: hand-made ones, and the one the model generator
// writes (tests/reference/k3_tokenizer_gen.py, built into the build tree).
#pragma once

#include <string>
#include <vector>

#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/tokenizer.h"

namespace nj::tok {

// The 256 single bytes (rank = byte value) followed by `merges`.
std::vector<std::string> byte_tokens_plus(const std::vector<std::string>& merges);

// tiktoken.model text for byte_tokens_plus(merges).
std::string tiktoken_model_text(const std::vector<std::string>& merges);

// A tokenizer_config.json naming a few specials for a vocabulary of `num_ranks`.
std::string tokenizer_config_text(int num_ranks);

// The generated test vocabulary's directory, its ranks and its tokenizer (loaded once).
const char* generated_model_dir();
const BpeRanks& generated_ranks();
const Tokenizer& generated_tokenizer();

}  // namespace nj::tok
