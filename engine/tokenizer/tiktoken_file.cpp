// Parses tiktoken.model (grammar in tiktoken_file.h).
#include "engine/tokenizer/tiktoken_file.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>

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
  std::vector<size_t> line_of_rank;
  bool byte_seen[256] = {};

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
    if (bytes->size() == 1) byte_seen[static_cast<uint8_t>((*bytes)[0])] = true;
    tokens.push_back(std::move(*bytes));
    line_of_rank.push_back(line_no);
  }
  if (tokens.empty()) return corruption(name + ": no ranks (the file is empty)");

  // Repeated bytes: sort the ranks by (hash, bytes); equal neighbours are repeats. Of all
  // repeats, report the one whose second occurrence comes first in the file.
  std::vector<std::pair<size_t, uint32_t>> by_hash;  // (hash of the bytes, rank)
  by_hash.reserve(tokens.size());
  const std::hash<std::string_view> hasher;
  for (size_t r = 0; r < tokens.size(); ++r) {
    by_hash.emplace_back(hasher(tokens[r]), static_cast<uint32_t>(r));
  }
  std::sort(by_hash.begin(), by_hash.end(), [&tokens](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (tokens[a.second] != tokens[b.second]) return tokens[a.second] < tokens[b.second];
    return a.second < b.second;
  });
  size_t first_repeat = tokens.size();  // the rank whose bytes an earlier rank has
  size_t earlier = 0;
  for (size_t i = 1; i < by_hash.size(); ++i) {
    const uint32_t a = by_hash[i - 1].second, b = by_hash[i].second;
    if (by_hash[i - 1].first == by_hash[i].first && tokens[a] == tokens[b] && b < first_repeat) {
      // Equal bytes sort by rank, so a run's first element is its earliest rank.
      size_t j = i - 1;
      while (j > 0 && by_hash[j - 1].first == by_hash[i].first &&
             tokens[by_hash[j - 1].second] == tokens[b]) {
        --j;
      }
      first_repeat = b;
      earlier = by_hash[j].second;
    }
  }
  if (first_repeat < tokens.size()) {
    return corruption(name + ":" + std::to_string(line_of_rank[first_repeat]) +
                      ": token bytes of rank " + std::to_string(first_repeat) + " repeat line " +
                      std::to_string(line_of_rank[earlier]));
  }

  for (int b = 0; b < 256; ++b) {
    if (!byte_seen[b]) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return corruption(name + ": byte " + hex + " has no rank (every single byte needs one)");
    }
  }
  return tokens;
}

}  // namespace nj::tok
