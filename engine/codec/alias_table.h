// Where each of a bf16 block's 4096 rANS slots goes (block_format.h): the alias layout.
//
// Plain rANS gives each symbol one contiguous range of slots, so finding a slot's symbol
// takes a search or a 4096-entry table. The alias layout cuts the 4096 slots into 16
// buckets of 256 and fills each bucket with at most two symbols (Walker's alias method on
// integer weights): piece 0 of bucket b is slots [256b, divider_end[b]), piece 1 the rest.
// A decoder then finds a slot's symbol, frequency and rank with one compare and three
// 32-entry lookups, which fit in vector registers. The layout is part of the format: the
// encoder and every decoder build it from the block's frequencies with this one function.
//
// Construction (deterministic): bucket b starts as symbol b's, with r[b] = freq[b] slots
// still to place. Symbols with r < 256 are "small", r > 256 "large", each list in symbol
// order. While a small symbol s remains: take the first small s and the first large l;
// bucket s holds r[s] slots of s (piece 0) and 256 - r[s] of l (piece 1); r[l] shrinks by
// that much and l moves to the end of the small list if r[l] < 256, or fills its own bucket
// if r[l] == 256. Buckets never paired hold one symbol. Each symbol's slots are then ranked
// in bucket order, piece 0 before piece 1.
#pragma once

#include <cstdint>

#include "engine/codec/block_format.h"

namespace nj {

struct AliasTable {
  uint32_t divider_end[16];  // [bucket]: first slot of piece 1
  // [piece * 16 + bucket]:
  uint32_t symbol[32];
  uint32_t freq[32];  // the symbol's frequency
  int32_t delta[32];  // slot + delta = the slot's rank among the symbol's slots
};

// REQUIRES: freq sums to kProbScale (parse_block checks it).
AliasTable build_alias_table(const uint16_t freq[kSymbols]);

// The scalar lookup every decoder must agree with.
inline uint32_t alias_index(const AliasTable& t, uint32_t slot) {
  const uint32_t b = slot >> 8;
  return b + (slot >= t.divider_end[b] ? 16u : 0u);
}

// The inverse, for the encoder: slot_of[cum[s] + rank] for each symbol s and rank < freq[s],
// with cum[s] the sum of the frequencies before s.
void alias_slots(const AliasTable& t, const uint16_t freq[kSymbols], uint16_t slot_of[kProbScale]);

}  // namespace nj
