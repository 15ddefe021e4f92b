// Rank BPE over a tiktoken vocabulary (k3-model.md §9): the mergeable ranks, indexed
// for encoding, and the merge loop.
//
// The rule (tiktoken's): a piece that is itself a token encodes as that token.
// Otherwise start from its single bytes and repeatedly merge the adjacent pair whose
// concatenation has the lowest rank, the leftmost such pair on a tie, until no
// adjacent concatenation is a token. Parts are always tokens (single bytes are, and a
// merge yields one), so "the rank of the concatenated bytes" is looked up as a
// pair of ranks: the table holds (left, right) → rank for every token and every way
// to split it into two tokens. The loop keeps the pairs in a min-heap keyed by
// (rank, byte offset) with stale entries skipped when popped: O(n log n) per piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nj::tok {

// Working memory for encode_piece, reused across the pieces of one text so that the
// loop allocates only when a piece is longer than any before it.
struct BpeScratch {
  std::vector<int32_t> rank;       // [n] rank of the part starting at byte i (if alive)
  std::vector<int32_t> next;       // [n] byte offset of the next part, n at the end
  std::vector<int32_t> prev;       // [n] byte offset of the previous part, -1 at the start
  std::vector<int32_t> pair_rank;  // [n] rank of (part i, next part), or kNoRank
  std::vector<uint64_t> heap;      // (pair rank << 32 | byte offset), a min-heap
};

// The mergeable ranks. Immutable after build(); thread-safe for concurrent readers.
class BpeRanks {
 public:
  static constexpr int32_t kNoRank = INT32_MAX;
  // Ranks are packed 21 bits each in the pair table (K3 has 163,584).
  static constexpr int32_t kMaxRanks = (1 << 21) - 1;

  BpeRanks() = default;

  // Indexes `tokens` (token i has rank i).
  // REQUIRES: the tokens are non-empty and distinct, every single byte is one of
  // them, and there are at most kMaxRanks (tiktoken_file.h checks all of this).
  static BpeRanks build(const std::vector<std::string>& tokens);

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }

  // The rank of a token's bytes, or nullopt if they are not a token.
  std::optional<int32_t> rank_of(std::string_view bytes) const;

  // The bytes of rank r. REQUIRES: 0 <= r < size().
  std::string_view bytes_of(int32_t r) const {
    return std::string_view(arena_).substr(offsets_[r], offsets_[r + 1] - offsets_[r]);
  }

  // The rank of the token that is bytes_of(left) + bytes_of(right), or kNoRank.
  int32_t merged(int32_t left, int32_t right) const;

  // Appends the ranks that encode `piece`. REQUIRES: !piece.empty().
  void encode_piece(std::string_view piece, BpeScratch* scratch, std::vector<int32_t>* out) const;

  // Bytes of memory held by the tables (for logs and the memory budget).
  size_t memory_bytes() const;

 private:
  void insert_pair(int32_t left, int32_t right, int32_t value);
  void merge_loop(const uint8_t* piece, int32_t n, BpeScratch* s, std::vector<int32_t>* out) const;

  std::string arena_;              // all token bytes, concatenated in rank order
  std::vector<uint32_t> offsets_;  // [size + 1] start of rank r's bytes in arena_
  int32_t byte_rank_[256] = {};    // rank of each single byte
  // Open addressing, linear probing, power-of-two sizes, load <= 1/2.
  std::vector<uint64_t> byte_slots_;  // hash tag << 32 | (rank + 1); 0 when free
  // left << 42 | right << 21 | rank of the concatenation; 0 when free (a merged
  // token's rank is never 0: ranks 0..255 include the single bytes).
  std::vector<uint64_t> pair_slots_;
  int pair_shift_ = 64;  // 64 - log2(pair_slots_.size())
};

}  // namespace nj::tok
