// StreamDecoder: holds an incomplete UTF-8 sequence until the next token completes it,
// never holds what cannot be completed, and adds up to decode().
#include "engine/tokenizer/stream_decoder.h"

#include <random>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/tokenizer/utf8.h"
#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::tok {
namespace {

TEST_CASE("a character split across tokens comes out whole", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  StreamDecoder d(t);
  // 中 = E4 B8 AD and 🙂 = F0 9F 99 82 as single-byte tokens.
  CHECK(d.push('a') == "a");
  CHECK(d.push(0xE4) == "");
  CHECK(d.held_bytes() == 1);
  CHECK(d.push(0xB8) == "");
  CHECK(d.push(0xAD) == "\xE4\xB8\xAD");
  CHECK(d.push(0xF0) == "");
  CHECK(d.push(0x9F) == "");
  CHECK(d.push(0x99) == "");
  CHECK(d.push(0x82) == "\xF0\x9F\x99\x82");
  CHECK(d.finish() == "");
}

TEST_CASE("bytes that cannot become a character are not held", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  StreamDecoder d(t);
  CHECK(d.push(0xFF) == "\xFF");
  CHECK(d.push(0x80) == "\x80");  // a stray continuation byte
  CHECK(d.push(0xE0) == "");
  CHECK(d.push(0x80) == "\xE0\x80");  // E0 80 is overlong: released
  CHECK(d.push(0xE4) == "");
  CHECK(d.push('x') == "\xE4x");  // interrupted: released with what follows
  CHECK(d.push(0xF4) == "");
  CHECK(d.finish() == "\xF4");  // held bytes come out at the end
  CHECK(d.held_bytes() == 0);
}

TEST_CASE("the pieces of a stream add up to decode()", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  std::mt19937 rng(5);
  for (int round = 0; round < 500; ++round) {
    std::vector<int32_t> ids(rng() % 20);
    for (int32_t& id : ids)
      id = static_cast<int32_t>(rng() % static_cast<uint32_t>(t.vocab_size() + 10)) - 5;
    StreamDecoder d(t);
    std::string streamed;
    for (size_t i = 0; i < ids.size(); ++i) {
      streamed += d.push(ids[i]);
      // What is out plus what is held is everything so far, and what is held is
      // exactly the incomplete character at the end.
      const std::string so_far = t.decode(std::span(ids).first(i + 1));
      REQUIRE(d.held_bytes() == incomplete_utf8_suffix(so_far));
      REQUIRE(streamed == so_far.substr(0, so_far.size() - d.held_bytes()));
    }
    streamed += d.finish();
    REQUIRE(streamed == t.decode(ids));
  }
}

TEST_CASE("valid text streams out exactly at character boundaries", "[engine][tokenizer]") {
  const Tokenizer& t = generated_tokenizer();
  const std::string text = "Ночь. 夜鹰の鳴き声 🌙 done";
  StreamDecoder d(t);
  for (int32_t id : t.encode(text)) {
    const std::string out = d.push(id);
    CHECK(is_valid_utf8(out));
  }
  CHECK(d.finish().empty());
}

TEST_CASE("incomplete_utf8_suffix recognises only proper prefixes of characters",
          "[engine][tokenizer]") {
  CHECK(incomplete_utf8_suffix("") == 0);
  CHECK(incomplete_utf8_suffix("abc") == 0);
  CHECK(incomplete_utf8_suffix("a\xC3") == 1);
  CHECK(incomplete_utf8_suffix("\xC3\xA9") == 0);
  CHECK(incomplete_utf8_suffix("\xE4\xB8") == 2);
  CHECK(incomplete_utf8_suffix("\xF0\x9F\x99") == 3);
  CHECK(incomplete_utf8_suffix("\xF0\x8F") == 0);  // overlong 4-byte form
  CHECK(incomplete_utf8_suffix("\xED\xA0") == 0);  // surrogate
  CHECK(incomplete_utf8_suffix("\xF4\x90") == 0);  // past U+10FFFF
  CHECK(incomplete_utf8_suffix("\xC1") == 0);      // never a lead byte
  CHECK(incomplete_utf8_suffix("\x80\x80\x80") == 0);
}

}  // namespace
}  // namespace nj::tok
