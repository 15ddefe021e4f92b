// The bf16 block's decode loop, once per SIMD level (block_format.h has the format).
// Kernels are pure: they read a parsed block and write values, allocate nothing and log
// nothing. The scalar one is the reference; the others must write the same bytes for a valid
// block and refuse the same blocks (the fault they name may differ within one step).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/codec/alias_table.h"
#include "engine/codec/block_format.h"

namespace nj {

// Where a decode stands: every lane's state and the next value, word and escape.
struct Bf16Cursor {
  uint32_t state[kLanes];
  size_t value = 0;
  size_t word = 0;
  size_t escape = 0;
};

enum class Bf16Fault {
  kNone = 0,
  kWordsExhausted,    // a lane needed a word past the last
  kEscapesExhausted,  // an escape symbol past the last escape byte
};

// Decodes values [c->value, b.values) into dst (2 bytes per value, from value 0 at dst),
// advancing *c. On a fault, c->value is the value that could not be decoded.
// REQUIRES: b is a parsed kBf16 block and t its alias table; dst holds b.raw_bytes.
Bf16Fault decode_bf16_scalar(const BlockView& b, const AliasTable& t, Bf16Cursor* c, uint8_t* dst);
// The same, with AVX2 (REQUIRES: the CPU has it) and AVX-512 F/BW/VL (likewise). They
// decode whole steps of kLanes values and leave the rest to the scalar loop.
Bf16Fault decode_bf16_avx2(const BlockView& b, const AliasTable& t, Bf16Cursor* c, uint8_t* dst);
Bf16Fault decode_bf16_avx512(const BlockView& b, const AliasTable& t, Bf16Cursor* c, uint8_t* dst);

}  // namespace nj
