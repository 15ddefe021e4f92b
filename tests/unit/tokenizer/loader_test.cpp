// Loading tiktoken.model and tokenizer_config.json: every malformed input is an error
// that names the file and the line (ranks) or the key (specials); never a crash.
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "engine/tokenizer/tiktoken_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::tok {
namespace {

std::string ranks_error(const std::string& text) {
  auto r = parse_tiktoken_model(text, "tiktoken.model");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kCorruption);
  return r.status().message();
}

// The 256 byte lines, then `extra` (with ranks from 256).
std::string bytes_then(const std::string& extra) {
  return tiktoken_model_text({}) + extra;
}

TEST_CASE("tiktoken.model: a well-formed file loads in rank order", "[engine][tokenizer]") {
  auto r = parse_tiktoken_model(bytes_then("YWI= 256\r\n\nYWJj 257"), "t");  // CRLF, blank, no EOL
  REQUIRE(r.ok());
  REQUIRE(r->size() == 258);
  CHECK((*r)[65] == "A");
  CHECK((*r)[256] == "ab");
  CHECK((*r)[257] == "abc");
}

TEST_CASE("tiktoken.model: a malformed line is named by number", "[engine][tokenizer]") {
  CHECK(ranks_error(bytes_then("YWI=\n")) ==
        "tiktoken.model:257: expected '<base64 token> <rank>', found 'YWI='");
  CHECK(ranks_error(bytes_then("YWI= x7\n")) ==
        "tiktoken.model:257: rank 'x7' is not a non-negative integer");
  CHECK(ranks_error(bytes_then("YWI= -1\n")) ==
        "tiktoken.model:257: rank '-1' is not a non-negative integer");
  CHECK(ranks_error(bytes_then("YW*= 256\n")) ==
        "tiktoken.model:257: token 'YW*=' is not valid base64");
  CHECK(ranks_error(bytes_then("YWI 256\n")) ==
        "tiktoken.model:257: token 'YWI' is not valid base64");
  CHECK(ranks_error(bytes_then("YWI= 256 7\n")) ==
        "tiktoken.model:257: rank '256 7' is not a non-negative integer");
}

TEST_CASE("tiktoken.model: a duplicate rank names both lines", "[engine][tokenizer]") {
  CHECK(ranks_error(bytes_then("YWI= 256\nYWJj 256\n")) ==
        "tiktoken.model:258: duplicate rank 256 (first on line 257)");
  CHECK(ranks_error(bytes_then("YWI= 7\n")) ==
        "tiktoken.model:257: duplicate rank 7 (first on line 8)");
}

TEST_CASE("tiktoken.model: a missing rank is reported where it should be", "[engine][tokenizer]") {
  CHECK(ranks_error(bytes_then("YWI= 256\nYWJj 258\n")) ==
        "tiktoken.model:258: expected rank 257, found 258 (rank 257 is missing)");
  CHECK(ranks_error("QQ== 1\n") ==
        "tiktoken.model:1: expected rank 0, found 1 (rank 0 is missing)");
}

TEST_CASE("tiktoken.model: repeated bytes, missing bytes and empty files are errors",
          "[engine][tokenizer]") {
  CHECK(ranks_error(bytes_then("YWI= 256\nYWI= 257\n")) ==
        "tiktoken.model:258: token bytes of rank 257 repeat line 257");
  // Of several repeats, the one met first in the file ("Y2Q=" is "cd").
  CHECK(ranks_error(bytes_then("YWI= 256\nY2Q= 257\nY2Q= 258\nYWI= 259\nY2Q= 260\n")) ==
        "tiktoken.model:259: token bytes of rank 258 repeat line 258");
  CHECK(ranks_error(bytes_then("YWI= 256\nAA== 257\n")) ==
        "tiktoken.model:258: token bytes of rank 257 repeat line 1");
  CHECK(ranks_error("QQ== 0\n") ==
        "tiktoken.model: byte 0x00 has no rank (every single byte needs one)");
  CHECK(ranks_error("") == "tiktoken.model: no ranks (the file is empty)");
  CHECK(ranks_error(bytes_then(" 256\n")) ==
        "tiktoken.model:257: expected '<base64 token> <rank>', found ' 256'");
}

TEST_CASE("base64 decoding is strict", "[engine][tokenizer]") {
  CHECK(decode_base64("") == std::string());
  CHECK(decode_base64("AA==") == std::string(1, '\0'));
  CHECK(decode_base64("/+8=") == std::string("\xFF\xEF"));
  CHECK_FALSE(decode_base64("A===").has_value());
  CHECK_FALSE(decode_base64("AA=A").has_value());
  CHECK_FALSE(decode_base64("AA==AAAA").has_value());
  CHECK_FALSE(decode_base64("AAA").has_value());
}

std::string load_error(const std::string& ranks, const std::string& config) {
  auto t = Tokenizer::from_contents(ranks, config, "model");
  REQUIRE_FALSE(t.ok());
  return t.status().message();
}

TEST_CASE("tokenizer_config.json: errors name the key or the line", "[engine][tokenizer]") {
  const std::string ranks = tiktoken_model_text({"ab"});  // 257 ranks
  const std::string syntax = load_error(ranks, "{\n  \"eos_token\": \"<|close|>\",\n  oops\n}");
  CHECK_THAT(syntax,
             Catch::StartsWith("model/tokenizer_config.json:3:3: invalid JSON: syntax error while "
                               "parsing object key"));
  CHECK(load_error(
            ranks,
            R"({"added_tokens_decoder": {"12": {"content": "<|x|>"}}, "eos_token": "<|x|>"})") ==
        "model/tokenizer_config.json: added_tokens_decoder[\"12\"] is a BPE rank "
        "(model/tiktoken.model has 257; specials start there)");
  CHECK(load_error(ranks, R"({"added_tokens_decoder": {"513": {"content": "<|x|>"}}})") ==
        "model/tokenizer_config.json: added_tokens_decoder[\"513\"] is past the 256 special ids "
        "(257..512)");
  CHECK(load_error(ranks, R"({"added_tokens_decoder": {"x": {"content": "<|x|>"}}})") ==
        "model/tokenizer_config.json: added_tokens_decoder[\"x\"]: the key is not a token id");
  CHECK(load_error(ranks, R"({"added_tokens_decoder": {"257": {"special": true}}})") ==
        "model/tokenizer_config.json: added_tokens_decoder[\"257\"] must be a string or an object "
        "with a string \"content\"");
  CHECK(
      load_error(
          ranks,
          R"({"added_tokens_decoder": {"257": "<|a|>", "258": "<|a|>"}, "eos_token": "<|a|>"})") ==
      "model/tokenizer_config.json: special tokens 257 and 258 are both named '<|a|>'");
  CHECK(load_error(ranks, "{}") == "model/tokenizer_config.json: no eos_token");
  CHECK(load_error(ranks, R"({"eos_token": "</s>"})") ==
        "model/tokenizer_config.json: eos_token '</s>' is not a special token");
  CHECK(load_error(ranks, "[1, 2]") ==
        "model/tokenizer_config.json: the top level must be a JSON object");
  // A rank-file error is reported before the config is looked at.
  CHECK(load_error("AA== 0\nAA== 1\n", "{}") ==
        "model/tiktoken.model:2: token bytes of rank 1 repeat line 1");
}

TEST_CASE("unnamed special ids get the reference tokenizer's reserved names",
          "[engine][tokenizer]") {
  auto t = Tokenizer::from_contents(tiktoken_model_text({"ab"}), tokenizer_config_text(257));
  REQUIRE(t.ok());
  CHECK(t->num_ranks() == 257);
  CHECK(t->vocab_size() == 513);
  CHECK(t->eos_id() == 259);
  CHECK(t->bos_id() == 257);
  CHECK(t->special_id("<|open|>") == 260);
  CHECK(t->special_id("<|reserved_token_258|>") == 258);
  CHECK(t->special_id("<|reserved_token_512|>") == 512);
  CHECK_FALSE(t->special_id("<|reserved_token_513|>").has_value());
  CHECK_FALSE(t->special_id("ab").has_value());
}

TEST_CASE("load reads a model directory and names missing files", "[engine][tokenizer]") {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("nj-tokenizer-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  CHECK_FALSE(Tokenizer::exists_in(dir.string()));
  auto missing = Tokenizer::load(dir.string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find((dir / "tiktoken.model").string()) != std::string::npos);

  std::ofstream(dir / "tiktoken.model") << tiktoken_model_text({"ab"});
  CHECK(Tokenizer::exists_in(dir.string()));
  auto no_config = Tokenizer::load(dir.string());
  REQUIRE_FALSE(no_config.ok());
  CHECK(no_config.status().message().find("tokenizer_config.json") != std::string::npos);

  std::ofstream(dir / "tokenizer_config.json") << tokenizer_config_text(257);
  auto ok = Tokenizer::load(dir.string());
  REQUIRE(ok.ok());
  CHECK(ok->encode("abab") == std::vector<int32_t>{256, 256});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nj::tok
