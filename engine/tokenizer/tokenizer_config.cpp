// Parses the special-token parts of tokenizer_config.json (layout in tokenizer_config.h).
#include "engine/tokenizer/tokenizer_config.h"

#include <charconv>

#include <nlohmann/json.hpp>

namespace nj::tok {
namespace {

using nlohmann::json;

// Line and column (1-based) of a byte offset.
std::string line_col(std::string_view text, size_t offset) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// A token given as "text" or as {"content": "text", ...}.
Result<std::optional<std::string>> token_text(const json& j, const std::string& where) {
  if (j.is_null()) return std::optional<std::string>();
  if (j.is_string()) return std::optional<std::string>(j.get<std::string>());
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return std::optional<std::string>(j["content"].get<std::string>());
  }
  return corruption(where + " must be a string or an object with a string \"content\"");
}

}  // namespace

Result<TokenizerConfig> parse_tokenizer_config(std::string_view contents, const std::string& name) {
  json root;
  try {
    root = json::parse(contents.begin(), contents.end());
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 3: <reason>"
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return corruption(name + ":" + line_col(contents, at) + ": invalid JSON: " + what);
  } catch (const json::exception& e) {  // out_of_range: a number like 1e999
    return corruption(name + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) return corruption(name + ": the top level must be a JSON object");

  TokenizerConfig config;
  if (root.contains("added_tokens_decoder")) {
    const json& added = root["added_tokens_decoder"];
    if (!added.is_object()) return corruption(name + ": added_tokens_decoder must be an object");
    for (const auto& [key, value] : added.items()) {
      const std::string where = name + ": added_tokens_decoder[\"" + key + "\"]";
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0) {
        return corruption(where + ": the key is not a token id");
      }
      NJ_ASSIGN_OR_RETURN(std::optional<std::string> text, token_text(value, where));
      if (!text || text->empty()) return corruption(where + ": no content");
      config.added_tokens[id] = std::move(*text);
    }
  }
  NJ_ASSIGN_OR_RETURN(config.bos_token,
                      token_text(root.value("bos_token", json()), name + ": bos_token"));
  NJ_ASSIGN_OR_RETURN(config.eos_token,
                      token_text(root.value("eos_token", json()), name + ": eos_token"));
  return config;
}

}  // namespace nj::tok
