// The alias layout of a bf16 block's slots (construction described in alias_table.h).
#include "engine/codec/alias_table.h"

#include <deque>

namespace nj {

AliasTable build_alias_table(const uint16_t freq[kSymbols]) {
  constexpr uint32_t kBucket = kProbScale / kSymbols;  // 256
  uint32_t sum = 0;
  int32_t r[kSymbols];
  for (int s = 0; s < kSymbols; ++s) {
    r[s] = freq[s];
    sum += freq[s];
  }
  NJ_CHECK(sum == kProbScale);
  uint32_t divider[kSymbols];
  uint32_t other[kSymbols];
  std::deque<int> small, large;
  for (int s = 0; s < kSymbols; ++s) {
    divider[s] = kBucket;  // a bucket never paired is its own symbol's
    other[s] = static_cast<uint32_t>(s);
    if (r[s] < static_cast<int32_t>(kBucket)) small.push_back(s);
    if (r[s] > static_cast<int32_t>(kBucket)) large.push_back(s);
  }
  while (!small.empty()) {
    NJ_CHECK(!large.empty());  // the slots left always fill the buckets left exactly
    const int s = small.front(), l = large.front();
    small.pop_front();
    divider[s] = static_cast<uint32_t>(r[s]);
    other[s] = static_cast<uint32_t>(l);
    r[l] -= static_cast<int32_t>(kBucket) - r[s];
    if (r[l] <= static_cast<int32_t>(kBucket)) {
      large.pop_front();
      if (r[l] < static_cast<int32_t>(kBucket)) small.push_back(l);
    }
  }
  AliasTable t{};
  uint32_t next_rank[kSymbols] = {};
  for (uint32_t b = 0; b < static_cast<uint32_t>(kSymbols); ++b) {
    const uint32_t start = b * kBucket, end = start + divider[b];
    t.divider_end[b] = end;
    t.symbol[b] = b;
    t.freq[b] = freq[b];
    t.delta[b] = static_cast<int32_t>(next_rank[b]) - static_cast<int32_t>(start);
    next_rank[b] += divider[b];
    const uint32_t o = other[b];
    t.symbol[16 + b] = o;
    t.freq[16 + b] = freq[o];
    t.delta[16 + b] = static_cast<int32_t>(next_rank[o]) - static_cast<int32_t>(end);
    next_rank[o] += kBucket - divider[b];
  }
  for (int s = 0; s < kSymbols; ++s) NJ_CHECK(next_rank[s] == freq[s]);
  return t;
}

void alias_slots(const AliasTable& t, const uint16_t freq[kSymbols], uint16_t slot_of[kProbScale]) {
  uint32_t cum[kSymbols];
  uint32_t c = 0;
  for (int s = 0; s < kSymbols; ++s) {
    cum[s] = c;
    c += freq[s];
  }
  for (uint32_t slot = 0; slot < kProbScale; ++slot) {
    const uint32_t i = alias_index(t, slot);
    const uint32_t rank = static_cast<uint32_t>(static_cast<int32_t>(slot) + t.delta[i]);
    slot_of[cum[t.symbol[i]] + rank] = static_cast<uint16_t>(slot);
  }
}

}  // namespace nj
