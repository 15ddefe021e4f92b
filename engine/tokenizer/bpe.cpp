// Rank BPE: the two hash tables of BpeRanks and the heap-driven merge loop.
#include "engine/tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

#include <xxhash.h>

#include "engine/util/status.h"

namespace nj::tok {
namespace {

inline uint64_t hash_bytes(const void* p, size_t n) {
  return XXH3_64bits(p, n);
}

// The pair key: left and right rank, 21 bits each.
inline uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(left) << 21 | static_cast<uint64_t>(right);
}

// Fibonacci hashing; the caller keeps the top bits.
inline uint64_t hash_pair(uint64_t key) {
  return key * 0x9E3779B97F4A7C15ull;
}

size_t table_size_for(size_t n) {
  return std::bit_ceil(std::max<size_t>(16, 2 * n));
}

}  // namespace

BpeRanks BpeRanks::build(const std::vector<std::string>& tokens) {
  NJ_CHECK(tokens.size() <= static_cast<size_t>(kMaxRanks));
  BpeRanks r;
  size_t total = 0;
  for (const auto& t : tokens) total += t.size();
  NJ_CHECK(total < (size_t{1} << 32));
  r.arena_.reserve(total);
  r.offsets_.reserve(tokens.size() + 1);
  for (const auto& t : tokens) {
    r.offsets_.push_back(static_cast<uint32_t>(r.arena_.size()));
    r.arena_ += t;
  }
  r.offsets_.push_back(static_cast<uint32_t>(r.arena_.size()));

  // bytes -> rank
  r.byte_slots_.assign(table_size_for(tokens.size()), 0);
  const size_t mask = r.byte_slots_.size() - 1;
  for (int32_t rank = 0; rank < r.size(); ++rank) {
    const std::string_view b = r.bytes_of(rank);
    NJ_CHECK(!b.empty());
    const uint64_t h = hash_bytes(b.data(), b.size());
    size_t i = h & mask;
    while (r.byte_slots_[i] != 0) {
      NJ_CHECK_MSG(r.bytes_of(static_cast<int32_t>(r.byte_slots_[i] & 0xFFFFFFFFu) - 1) != b,
                   "duplicate token bytes");
      i = (i + 1) & mask;
    }
    r.byte_slots_[i] = (h >> 32) << 32 | static_cast<uint64_t>(rank + 1);
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const auto rank = r.rank_of(std::string_view(&c, 1));
    NJ_CHECK_MSG(rank.has_value(), "a single byte has no rank");
    r.byte_rank_[b] = *rank;
  }

  // (left, right) -> rank, for every split of every token into two tokens.
  std::vector<uint64_t> pairs;  // packed as in pair_slots_
  pairs.reserve(tokens.size() * 2);
  for (int32_t rank = 0; rank < r.size(); ++rank) {
    const std::string_view b = r.bytes_of(rank);
    for (size_t split = 1; split < b.size(); ++split) {
      const auto left = r.rank_of(b.substr(0, split));
      if (!left) continue;
      const auto right = r.rank_of(b.substr(split));
      if (!right) continue;
      pairs.push_back(pair_key(*left, *right) << 21 | static_cast<uint64_t>(rank));
    }
  }
  r.pair_slots_.assign(table_size_for(pairs.size()), 0);
  r.pair_shift_ = 64 - std::countr_zero(r.pair_slots_.size());
  for (uint64_t p : pairs) {
    r.insert_pair(static_cast<int32_t>(p >> 42), static_cast<int32_t>((p >> 21) & kMaxRanks),
                  static_cast<int32_t>(p & kMaxRanks));
  }
  return r;
}

void BpeRanks::insert_pair(int32_t left, int32_t right, int32_t value) {
  const uint64_t key = pair_key(left, right);
  const size_t mask = pair_slots_.size() - 1;
  size_t i = hash_pair(key) >> pair_shift_;
  while (pair_slots_[i] != 0) {
    NJ_CHECK((pair_slots_[i] >> 21) != key);  // the concatenation determines the token
    i = (i + 1) & mask;
  }
  pair_slots_[i] = key << 21 | static_cast<uint64_t>(value);
}

std::optional<int32_t> BpeRanks::rank_of(std::string_view bytes) const {
  const uint64_t h = hash_bytes(bytes.data(), bytes.size());
  const uint64_t tag = h >> 32;
  const size_t mask = byte_slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint64_t slot = byte_slots_[i];
    if (slot == 0) return std::nullopt;
    if ((slot >> 32) == tag) {
      const int32_t rank = static_cast<int32_t>(slot & 0xFFFFFFFFu) - 1;
      const uint32_t off = offsets_[rank];
      const size_t len = offsets_[rank + 1] - off;
      if (len == bytes.size() && std::memcmp(arena_.data() + off, bytes.data(), len) == 0) {
        return rank;
      }
    }
  }
}

int32_t BpeRanks::merged(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = pair_slots_.size() - 1;
  for (size_t i = hash_pair(key) >> pair_shift_;; i = (i + 1) & mask) {
    const uint64_t slot = pair_slots_[i];
    if (slot == 0) return kNoRank;  // first: an empty slot would match key (0, 0)
    if ((slot >> 21) == key) return static_cast<int32_t>(slot & kMaxRanks);
  }
}

void BpeRanks::encode_piece(std::string_view piece, BpeScratch* scratch,
                            std::vector<int32_t>* out) const {
  const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
  if (piece.size() == 1) {
    out->push_back(byte_rank_[p[0]]);
    return;
  }
  if (const auto whole = rank_of(piece)) {
    out->push_back(*whole);
    return;
  }
  NJ_CHECK(piece.size() < (size_t{1} << 31));
  merge_loop(p, static_cast<int32_t>(piece.size()), scratch, out);
}

void BpeRanks::merge_loop(const uint8_t* piece, int32_t n, BpeScratch* s,
                          std::vector<int32_t>* out) const {
  // Parts are identified by the byte offset where they start; a merge keeps the left
  // part's offset, so offsets order the parts and break rank ties leftmost-first.
  s->rank.resize(n);
  s->next.resize(n);
  s->prev.resize(n);
  s->pair_rank.resize(n);
  s->heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s->rank[i] = byte_rank_[piece[i]];
    s->next[i] = i + 1;
    s->prev[i] = i - 1;
  }
  // Heap entries order by rank, then offset: the minimum is the leftmost lowest pair.
  auto entry = [](int32_t rank, int32_t at) {
    return static_cast<uint64_t>(rank) << 32 | static_cast<uint32_t>(at);
  };
  auto push = [s, &entry](int32_t rank, int32_t at) {
    s->heap.push_back(entry(rank, at));
    std::push_heap(s->heap.begin(), s->heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    s->pair_rank[i] = merged(s->rank[i], s->rank[i + 1]);
    if (s->pair_rank[i] != kNoRank) s->heap.push_back(entry(s->pair_rank[i], i));
  }
  s->pair_rank[n - 1] = kNoRank;
  std::make_heap(s->heap.begin(), s->heap.end(), std::greater<>());

  while (!s->heap.empty()) {
    std::pop_heap(s->heap.begin(), s->heap.end(), std::greater<>());
    const uint64_t top = s->heap.back();
    s->heap.pop_back();
    const auto rank = static_cast<int32_t>(top >> 32);
    const auto at = static_cast<int32_t>(top & 0xFFFFFFFFu);
    // Stale: the part merged into its left neighbour, or its right neighbour changed.
    // (A dead part's pair_rank is kNoRank, which no entry carries; an old entry that
    // happens to equal the current pair describes that pair, so taking it is right.)
    if (s->pair_rank[at] != rank) continue;

    const int32_t right = s->next[at];
    const int32_t after = s->next[right];
    s->rank[at] = rank;
    s->next[at] = after;
    if (after < n) s->prev[after] = at;
    s->pair_rank[right] = kNoRank;

    s->pair_rank[at] = after < n ? merged(rank, s->rank[after]) : kNoRank;
    if (s->pair_rank[at] != kNoRank) push(s->pair_rank[at], at);
    const int32_t before = s->prev[at];
    if (before >= 0) {
      s->pair_rank[before] = merged(s->rank[before], rank);
      if (s->pair_rank[before] != kNoRank) push(s->pair_rank[before], before);
    }
  }
  for (int32_t i = 0; i < n; i = s->next[i]) out->push_back(s->rank[i]);
}

size_t BpeRanks::memory_bytes() const {
  return arena_.capacity() + offsets_.capacity() * sizeof(uint32_t) +
         byte_slots_.capacity() * sizeof(uint64_t) + pair_slots_.capacity() * sizeof(uint64_t);
}

}  // namespace nj::tok
