// Rank BPE: lowest rank first, leftmost on ties, whole-piece tokens, and agreement
// with a direct transcription of tiktoken's quadratic merge loop.
#include "engine/tokenizer/bpe.h"

#include <climits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::tok {
namespace {

// tiktoken's _byte_pair_merge as written there: rescan for the minimum after each merge.
std::vector<int32_t> reference_merge(const BpeRanks& ranks, std::string_view piece) {
  if (auto whole = ranks.rank_of(piece)) return {*whole};
  std::vector<size_t> starts;  // part boundaries, plus piece.size() at the end
  for (size_t i = 0; i <= piece.size(); ++i) starts.push_back(i);
  auto rank_at = [&](size_t i) -> int64_t {
    if (i + 2 >= starts.size()) return INT64_MAX;
    auto r = ranks.rank_of(piece.substr(starts[i], starts[i + 2] - starts[i]));
    return r ? *r : INT64_MAX;
  };
  while (starts.size() > 2) {
    int64_t best = INT64_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 2 < starts.size(); ++i) {
      const int64_t r = rank_at(i);
      if (r < best) best = r, at = i;
    }
    if (best == INT64_MAX) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    out.push_back(*ranks.rank_of(piece.substr(starts[i], starts[i + 1] - starts[i])));
  }
  return out;
}

std::vector<int32_t> encode(const BpeRanks& ranks, std::string_view piece) {
  BpeScratch scratch;
  std::vector<int32_t> out;
  ranks.encode_piece(piece, &scratch, &out);
  return out;
}

TEST_CASE("bpe merges the lowest-ranked pair first", "[engine][tokenizer]") {
  // 256 "ab" 257 "bc" 258 "abc": in "abc", "ab" (256) beats "bc" (257).
  const BpeRanks ranks = BpeRanks::build(byte_tokens_plus({"ab", "bc", "abc"}));
  CHECK(encode(ranks, "abc") == std::vector<int32_t>{258});  // whole piece
  CHECK(encode(ranks, "abcc") == std::vector<int32_t>{258, 'c'});
  // 256 "bc" 257 "ab": now "bc" wins, and "a"+"bc" is not a token.
  const BpeRanks other = BpeRanks::build(byte_tokens_plus({"bc", "ab"}));
  CHECK(encode(other, "abcd") == std::vector<int32_t>{'a', 256, 'd'});
}

TEST_CASE("bpe breaks rank ties leftmost-first", "[engine][tokenizer]") {
  const BpeRanks ranks = BpeRanks::build(byte_tokens_plus({"aa"}));
  CHECK(encode(ranks, "aaa") == std::vector<int32_t>{256, 'a'});
  CHECK(encode(ranks, "aaaaa") == std::vector<int32_t>{256, 256, 'a'});
}

TEST_CASE("bpe finds pairs by rank pair and concatenation alike", "[engine][tokenizer]") {
  const BpeRanks ranks = BpeRanks::build(byte_tokens_plus({"ab", "cd", "abcd", "bc"}));
  CHECK(ranks.merged(256, 257) == 258);
  CHECK(ranks.merged('b', 'c') == 259);
  CHECK(ranks.merged('a', 259) == BpeRanks::kNoRank);
  CHECK(ranks.rank_of("abcd") == 258);
  CHECK_FALSE(ranks.rank_of("abc").has_value());
  CHECK(ranks.bytes_of(259) == "bc");
}

TEST_CASE("bpe agrees with tiktoken's merge loop on random pieces", "[engine][tokenizer]") {
  const BpeRanks& ranks = generated_ranks();
  std::mt19937 rng(99);
  const std::string alphabet = "etaoin shrdlu'\xD0\xB5\xE4\xB8\xAD";
  for (int round = 0; round < 3000; ++round) {
    std::string piece(1 + rng() % 24, '\0');
    for (char& c : piece)
      c = rng() % 8 == 0 ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    INFO("piece " << piece);
    REQUIRE(encode(ranks, piece) == reference_merge(ranks, piece));
  }
}

TEST_CASE("bpe handles a piece of 100,000 bytes", "[engine][tokenizer]") {
  const BpeRanks& ranks = generated_ranks();
  std::string piece;
  for (int i = 0; i < 10000; ++i) piece += "abracadabr";
  const auto ids = encode(ranks, piece);
  std::string joined;
  for (int32_t id : ids) joined += ranks.bytes_of(id);
  CHECK(joined == piece);
  CHECK(ids.size() < piece.size());  // it merged
}

}  // namespace
}  // namespace nj::tok
