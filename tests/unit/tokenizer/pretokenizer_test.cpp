// The K3 pre-tokenizer on hand-picked cases: each alternative of the pattern, the
// backtracking corners, the Han rule, the class intersections, the case-insensitive
// contractions, the 25,000-character run splitting and invalid UTF-8.
// (tests/tokenizer/parity_test.py checks the same code against tiktoken at scale.)
#include "engine/tokenizer/pretokenizer.h"

#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "engine/tokenizer/unicode_class.h"

namespace nj::tok {
namespace {

std::vector<std::string> pieces(std::string_view text, size_t max_run = kMaxRunChars) {
  std::vector<std::string> out;
  for (std::string_view p : pre_tokenize(text, max_run)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST_CASE("words take one leading non-letter and trailing contractions", "[engine][tokenizer]") {
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("don't stop") == V{"don't", " stop"});
  CHECK(pieces("\"quoted\" text") == V{"\"quoted", "\"", " text"});
  CHECK(pieces("\tindented") == V{"\tindented"});
  CHECK(pieces("\u00a0nbsp") == V{"\u00a0nbsp"});  // any non-\r\n non-letter prefixes
  CHECK(pieces("\nline") == V{"\n", "line"});      // but not \r or \n
}

TEST_CASE("contractions match in any case, including the long s", "[engine][tokenizer]") {
  CHECK(pieces("IT'S YOU'LL We'Re i'M he'D they'VE can'T") ==
        V{"IT'S", " YOU'LL", " We'Re", " i'M", " he'D", " they'VE", " can'T"});
  CHECK(pieces("IT\u2019S") == V{"IT", "\u2019S"});  // only the ASCII apostrophe
  CHECK(pieces("it'\u017f") == V{"it'\u017f"});      // U+017F folds to 's'
  CHECK(pieces("x'sy") == V{"x's", "y"});
  CHECK(pieces("x's's") == V{"x's", "'s"});
  CHECK(pieces("'s") == V{"'s"});  // no letters before: punctuation prefix + word
}

TEST_CASE("upper-case runs and camel case split the way the pattern backtracks",
          "[engine][tokenizer]") {
  CHECK(pieces("HelloWORLDfoo") == V{"Hello", "WORLDfoo"});
  CHECK(pieces("ABCdef") == V{"ABCdef"});
  CHECK(pieces("aBC") == V{"a", "BC"});
  CHECK(pieces("HTTPServer") == V{"HTTPServer"});
  CHECK(pieces("ǅungla") == V{"ǅungla"});  // titlecase (Lt) leads like upper case
  CHECK(pieces("ʰello") == V{"ʰello"});    // modifier letter (Lm) is in both classes
  // Lo is in both classes: U* eats it and gives it back so W+ can match.
  CHECK(pieces("Aא") == V{"Aא"});
  CHECK(pieces("אB") == V{"א", "B"});
}

TEST_CASE("marks join letters and may lead a word", "[engine][tokenizer]") {
  CHECK(pieces("e\u0301te\u0301") == V{"e\u0301te\u0301"});
  CHECK(pieces("\u0301a") == V{"\u0301a"});
  CHECK(pieces(" \u0301") == V{" \u0301"});
}

TEST_CASE("Han characters form their own runs, separate from kana and punctuation",
          "[engine][tokenizer]") {
  CHECK(pieces("中文字") == V{"中文字"});
  CHECK(pieces("日本語のテキスト") == V{"日本語", "のテキスト"});
  CHECK(pieces("中、文。") == V{"中", "、", "文", "。"});  // Script=Han, not Script_Extensions
  CHECK(pieces("々〇") == V{"々〇"});                      // Lm and Nl, but Han
  CHECK(pieces("a中") == V{"a", "中"});
  CHECK(pieces(" 中") == V{" ", "中"});  // Han takes no prefix
  CHECK(pieces("!⺀⺁") == V{"!⺀⺁"});  // Han radicals are symbols too
}

TEST_CASE("numbers come in groups of at most three", "[engine][tokenizer]") {
  CHECK(pieces("1234567") == V{"123", "456", "7"});
  CHECK(pieces("x=12345") == V{"x", "=", "123", "45"});
  CHECK(pieces("٣٤٥٦") == V{"٣٤٥", "٦"});
  CHECK(pieces("Ⅻ½2") == V{"Ⅻ½2"});
  CHECK(pieces(" 42") == V{" ", "42"});
}

TEST_CASE("punctuation takes one leading space and trailing line breaks", "[engine][tokenizer]") {
  CHECK(pieces("a, b") == V{"a", ",", " b"});
  CHECK(pieces("x !?\n\ny") == V{"x", " !?\n\n", "y"});
  CHECK(pieces("\t!") == V{"\t", "!"});  // only U+0020 may lead punctuation
  CHECK(pieces("🙂🙂 👍🏽") == V{"🙂🙂", " 👍🏽"});
  CHECK(pieces("  ->") == V{" ", " ->"});
}

TEST_CASE("whitespace keeps its last character for the next piece", "[engine][tokenizer]") {
  CHECK(pieces("a   b") == V{"a", "  ", " b"});
  CHECK(pieces("trailing   ") == V{"trailing", "   "});
  CHECK(pieces("a\n\n\nb") == V{"a", "\n\n\n", "b"});
  CHECK(pieces("a  \n  \n  b") == V{"a", "  \n  \n", " ", " b"});
  CHECK(pieces("\r\n\r\n") == V{"\r\n\r\n"});
  CHECK(pieces("x \ty") == V{"x", " ", "\ty"});
  CHECK(pieces("\u3000\u3000y") == V{"\u3000", "\u3000y"});
  CHECK(pieces("a\u0085b") == V{"a", "\u0085b"});  // NEL is \s, not \r\n
}

TEST_CASE("the pieces tile any byte string, invalid UTF-8 included", "[engine][tokenizer]") {
  std::mt19937 rng(1234);
  for (int round = 0; round < 2000; ++round) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? "a \n'1"[rng() % 5] : rng() & 0xFF);
    std::string joined;
    for (std::string_view p : pre_tokenize(s)) {
      REQUIRE(!p.empty());
      joined += p;
    }
    REQUIRE(joined == s);
  }
}

TEST_CASE("invalid bytes are single punctuation characters", "[engine][tokenizer]") {
  CHECK(pieces("ab\xFF\xFE"
               "cd") == V{"ab", "\xFF\xFE", "cd"});
  CHECK(pieces("\xFF"
               "cd") == V{"\xFF"
                          "cd"});                            // like any symbol, it may lead a word
  CHECK(pieces("\xE4\xB8") == V{"\xE4\xB8"});                // truncated 中
  CHECK(pieces("\xC0\xAF") == V{"\xC0\xAF"});                // overlong '/'
  CHECK(pieces("x\xED\xA0\x80") == V{"x", "\xED\xA0\x80"});  // a surrogate
}

TEST_CASE("runs longer than the limit are cut, counting characters", "[engine][tokenizer]") {
  // The limit is a parameter so the rule can be checked on short strings.
  CHECK(pieces("aaaaaaa", 3) == V{"aaa", "aaa", "a"});
  CHECK(pieces("ab  cdef", 3) == V{"ab", " ", " cde", "f"});  // segments "ab  cde", "f"
  CHECK(pieces("  \xE4\xB8\xAD\xE4\xB8\xAD", 1) == V{" ", " ", "\xE4\xB8\xAD", "\xE4\xB8\xAD"});
  // Python's isspace() counts U+001C..U+001F as whitespace though \s does not.
  CHECK(pieces("ab\x1c\x1c\x1c", 2) == V{"ab", "\x1c\x1c", "\x1c"});

  const std::string word(60000, 'x');
  const auto p = pre_tokenize(word);
  REQUIRE(p.size() == 3);
  CHECK(p[0].size() == kMaxRunChars);
  CHECK(p[1].size() == kMaxRunChars);
  CHECK(p[2].size() == 10000);
  // A run of exactly the limit is not cut; mixed runs never are.
  CHECK(pre_tokenize(std::string(kMaxRunChars, 'y')).size() == 1);
  const std::string spaces = std::string(30000, ' ') + "z";
  const auto s = pre_tokenize(spaces);
  REQUIRE(s.size() == 3);
  CHECK(s[0].size() == kMaxRunChars);  // \s+(?!\S) at the segment's end takes it all
  CHECK(s[1] == std::string(4999, ' '));
  CHECK(s[2] == " z");
}

TEST_CASE("the class tables are Unicode 16 and agree with the pattern's classes",
          "[engine][tokenizer]") {
  CHECK(std::string(unicode_tables_version()) == "16.0.0");
  CHECK(char_class('a') == (kLowerish | kLetter));
  CHECK(char_class('A') == (kUpperish | kLetter));
  CHECK(char_class(0x4E2D) == (kLetter | kHan));  // 中
  CHECK(char_class(0x3001) == 0);                 // 、 punctuation, Script=Common
  CHECK(char_class(0x0301) == (kUpperish | kLowerish));
  CHECK(char_class(0x10D4A) == (kUpperish | kLowerish | kLetter));  // Garay, new in 16.0
  CHECK(char_class(0x10940) == 0);  // Sidetic, new in 17.0: unassigned
  CHECK(char_class('\n') == (kSpace | kPySpace | kLineBreak));
  CHECK(char_class(0x1C) == kPySpace);
  CHECK(char_class(0x85) == (kSpace | kPySpace));
  CHECK(char_class(0x110000) == 0);
}

}  // namespace
}  // namespace nj::tok
