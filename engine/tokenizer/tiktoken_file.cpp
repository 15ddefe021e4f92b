// Parses tiktoken.model (grammar in tiktoken_file.h).
#include "engine/tokenizer/tiktoken_file.h"

#include <charconv>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "engine/tokenizer/bpe.h"

namespace nj::tok {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string shorten(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out;
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = base64_value(c);
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t bits =
        uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(static_cast<char>(bits >> 16));
    if (pad < 2) out.push_back(static_cast<char>((bits >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(bits & 0xFF));
  }
  return out;
}

Result<std::vector<std::string>> parse_tiktoken_model(std::string_view contents,
                                                      const std::string& name) {
  std::vector<std::string> tokens;
  std::unordered_map<std::string_view, size_t> line_of;  // token bytes -> line number
  std::vector<size_t> line_of_rank;
  // Views into `tokens` must stay valid: reserve for the upper bound of lines.
  size_t max_lines = 1;
  for (char c : contents) max_lines += (c == '\n');
  tokens.reserve(max_lines);
  line_of.reserve(max_lines);

  size_t line_no = 0;
  size_t pos = 0;
  while (pos < contents.size()) {
    size_t eol = contents.find('\n', pos);
    if (eol == std::string_view::npos) eol = contents.size();
    std::string_view line = contents.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;

    auto fail = [&](const std::string& what) {
      return corruption(name + ":" + std::to_string(line_no) + ": " + what);
    };
    size_t sp = 0;
    while (sp < line.size() && !is_blank(line[sp])) ++sp;
    size_t digits = sp;
    while (digits < line.size() && is_blank(line[digits])) ++digits;
    if (sp == 0 || sp == line.size() || digits == line.size()) {
      return fail("expected '<base64 token> <rank>', found '" + shorten(line) + "'");
    }
    const std::string_view b64 = line.substr(0, sp);
    const std::string_view rank_text = line.substr(digits);
    uint64_t rank = 0;
    const auto [end, ec] =
        std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || end != rank_text.data() + rank_text.size()) {
      return fail("rank '" + shorten(rank_text) + "' is not a non-negative integer");
    }
    auto bytes = decode_base64(b64);
    if (!bytes) return fail("token '" + shorten(b64) + "' is not valid base64");
    if (bytes->empty()) return fail("token is empty");

    const uint64_t expected = tokens.size();
    if (rank < expected) {
      return fail("duplicate rank " + std::to_string(rank) + " (first on line " +
                  std::to_string(line_of_rank[rank]) + ")");
    }
    if (rank > expected) {
      return fail("expected rank " + std::to_string(expected) + ", found " + std::to_string(rank) +
                  " (rank " + std::to_string(expected) + " is missing)");
    }
    if (rank >= static_cast<uint64_t>(BpeRanks::kMaxRanks)) {
      return fail("more than " + std::to_string(BpeRanks::kMaxRanks) +
                  " ranks (the most supported)");
    }
    tokens.push_back(std::move(*bytes));
    const auto [it, inserted] = line_of.emplace(tokens.back(), line_no);
    if (!inserted) {
      return fail("token bytes of rank " + std::to_string(rank) + " repeat line " +
                  std::to_string(it->second));
    }
    line_of_rank.push_back(line_no);
  }
  if (tokens.empty()) return corruption(name + ": no ranks (the file is empty)");
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (line_of.find(std::string_view(&c, 1)) == line_of.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return corruption(name + ": byte " + hex + " has no rank (every single byte needs one)");
    }
  }
  return tokens;
}

}  // namespace nj::tok
