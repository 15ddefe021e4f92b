// The Tokenizer end to end on the generated vocabulary: round trips (text, random
// bytes, invalid UTF-8), specials only when asked, ids and names.
#include "engine/tokenizer/tokenizer.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::tok {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE("the generated vocabulary loads with K3's special layout", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  CHECK(t.num_ranks() == 256 + 3000);
  CHECK(t.vocab_size() == t.num_ranks() + 256);
  // The chat control tokens at K3's 163586..163589 = 163584 + 2..5 (k3-model.md 9.1).
  CHECK(t.eos_id() == t.num_ranks() + 2);
  CHECK(t.special_id("<|end_of_msg|>") == t.eos_id());
  CHECK(t.special_id("<|open|>") == t.num_ranks() + 3);
  CHECK(t.special_id("<|close|>") == t.num_ranks() + 4);
  CHECK(t.special_id("<|sep|>") == t.num_ranks() + 5);
  CHECK(t.bos_id() == t.special_id("[BOS]"));
  CHECK(t.is_special(t.eos_id()));
  CHECK_FALSE(t.is_special(t.num_ranks() - 1));
}

TEST_CASE("decode(encode(x)) == x for every corpus line and the whole corpus",
          "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  const std::string corpus = read_text(std::string(NJ_SOURCE_DIR) + "/tests/tokenizer/corpus.txt");
  REQUIRE(corpus.size() > 1000);
  CHECK(t.decode(t.encode(corpus)) == corpus);
  std::istringstream lines(corpus);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    INFO("line " << n << ": " << line);
    REQUIRE(t.decode(t.encode(line)) == line);
    ++n;
  }
  CHECK(n > 100);
}

TEST_CASE("decode(encode(x)) == x for random byte strings, invalid UTF-8 included",
          "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  std::mt19937 rng(2024);
  const std::vector<std::string> atoms = {
      "a",        "The",  " ",        "\n",       "\t",
      "'s",       "1",    "中",       "é",        "\xF0\x9F\x99\x82",
      "\xFF",     "\x80", "\xE4\xB8", "\xC0\xAF", "\xED\xA0\x80",
      "<|close|>"};
  for (int round = 0; round < 3000; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0)
        s += static_cast<char>(rng() & 0xFF);
      else
        s += atoms[rng() % atoms.size()];
    }
    const auto ids = t.encode(s);
    for (int32_t id : ids) REQUIRE_FALSE(t.is_special(id));
    REQUIRE(t.decode(ids) == s);
  }
}

TEST_CASE("long runs round-trip across the 25,000-character cut", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  const std::string s =
      std::string(30000, 'a') + std::string(26000, ' ') + "\xE4\xB8\xAD" + std::string(50001, 'z');
  CHECK(t.decode(t.encode(s)) == s);
}

TEST_CASE("special names are plain text unless specials are asked for", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  const int32_t open = *t.special_id("<|open|>");
  const int32_t close = *t.special_id("<|close|>");
  const std::string text = "<|open|>user<|sep|>Hi there<|close|>";

  const auto plain = t.encode(text);
  for (int32_t id : plain) CHECK_FALSE(t.is_special(id));
  CHECK(t.decode(plain) == text);

  const auto chat = t.encode_with_specials(text);
  REQUIRE(chat.size() >= 4);
  CHECK(chat.front() == open);
  CHECK(chat.back() == close);
  CHECK(std::count_if(chat.begin(), chat.end(), [&](int32_t id) { return t.is_special(id); }) == 3);
  CHECK(t.decode(chat) == text);
  // Text between specials is encoded exactly as on its own.
  const auto hi = t.encode("Hi there");
  CHECK(std::vector<int32_t>(chat.end() - 1 - static_cast<long>(hi.size()), chat.end() - 1) == hi);
  // Reserved names count as specials; near misses do not.
  const std::string reserved = "<|reserved_token_" + std::to_string(t.num_ranks() + 100) + "|>";
  CHECK(t.encode_with_specials(reserved) == std::vector<int32_t>{t.num_ranks() + 100});
  for (int32_t id : t.encode_with_specials("<|open|")) CHECK_FALSE(t.is_special(id));
}

TEST_CASE("decode passes raw bytes and skips ids outside the vocabulary", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  CHECK(t.decode(std::vector<int32_t>{0xE4, 0xB8}) == "\xE4\xB8");  // half a character
  CHECK(t.decode(std::vector<int32_t>{'a', -1, t.vocab_size(), 'b'}) == "ab");
  CHECK(t.decode(std::vector<int32_t>{t.eos_id()}) == "<|end_of_msg|>");
  CHECK(t.check_ids(std::vector<int32_t>{1, 2, t.vocab_size() - 1}).ok());
  const Status bad = t.check_ids(std::vector<int32_t>{1, t.vocab_size()});
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message() == "token id " + std::to_string(t.vocab_size()) +
                             " (at position 1) is outside the vocabulary (0.." +
                             std::to_string(t.vocab_size() - 1) + ")");
  CHECK_FALSE(t.token_bytes(-5).has_value());
  CHECK(t.token_bytes('x') == "x");
}

TEST_CASE("encoding is deterministic and the empty text has no ids", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  CHECK(t.encode("").empty());
  CHECK(t.encode_with_specials("").empty());
  CHECK(t.encode("The night is long.") == t.encode("The night is long."));
  CHECK(t.encode(" the").size() == 1);  // a frequent word with its space is one token
}

}  // namespace
}  // namespace nj::tok
