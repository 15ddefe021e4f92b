// Vocabularies for the tokenizer tests (see test_vocab.h).
#include "tests/unit/tokenizer/test_vocab.h"

#include <cstdio>
#include <cstdlib>

#include "engine/io/file.h"
#include "engine/tokenizer/tiktoken_file.h"

namespace nj::tok {

std::vector<std::string> byte_tokens_plus(const std::vector<std::string>& merges) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  tokens.insert(tokens.end(), merges.begin(), merges.end());
  return tokens;
}

namespace {
std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "test vocabulary: %s\n", what.c_str());
  std::abort();
}
}  // namespace

std::string tiktoken_model_text(const std::vector<std::string>& merges) {
  std::string out;
  const auto tokens = byte_tokens_plus(merges);
  for (size_t r = 0; r < tokens.size(); ++r)
    out += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return out;
}

std::string tokenizer_config_text(int num_ranks) {
  auto entry = [&](int offset, const char* name) {
    return "    \"" + std::to_string(num_ranks + offset) + "\": {\"content\": \"" + name +
           "\", \"special\": true}";
  };
  return "{\n  \"added_tokens_decoder\": {\n" + entry(0, "[BOS]") + ",\n" +
         entry(2, "<|end_of_msg|>") + ",\n" + entry(3, "<|open|>") + ",\n" + entry(4, "<|close|>") +
         ",\n" + entry(5, "<|sep|>") + "\n  },\n" +
         "  \"bos_token\": \"[BOS]\",\n  \"eos_token\": {\"content\": \"<|end_of_msg|>\"}\n}\n";
}

const char* generated_model_dir() {
  return NJ_TEST_TOKENIZER_DIR;
}

const BpeRanks& generated_ranks() {
  static const BpeRanks ranks = [] {
    const std::string path = std::string(generated_model_dir()) + "/tiktoken.model";
    auto text = read_small_file(path);
    if (!text.ok()) die(text.status().message());
    auto tokens = parse_tiktoken_model(*text, path);
    if (!tokens.ok()) die(tokens.status().message());
    return BpeRanks::build(*tokens);
  }();
  return ranks;
}

const Tokenizer& generated_tokenizer() {
  static const Tokenizer tokenizer = [] {
    auto t = Tokenizer::load(generated_model_dir());
    if (!t.ok()) die(t.status().message());
    return std::move(t).value();
  }();
  return tokenizer;
}

}  // namespace nj::tok
