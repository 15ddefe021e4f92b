// The lossless block: how a run of trunk bytes is stored in a lossless pack (pack.h), and
// the checks a stored block must pass before anything decodes it.
//
// A block holds up to kMaxBlockRawBytes of a unit's run. Blocks are independent: each
// decodes alone into its place in the unit's buffer. Integers are little-endian.
//
//   block        := header payload
//   header       := type:u8 reserved:u8[3] (zero) raw_bytes:u32       8 bytes
//   payload      := raw-payload | bf16-payload                         by type
//   raw-payload  := bytes:u8[raw_bytes]                                type 0
//   bf16-payload := freq:u16[16] exponent:u8[16] state:u32[128]         type 1
//                   word_count:u32 escape_count:u32
//                   sign_mantissa:u8[n] words:u16[word_count] escapes:u8[escape_count]
//
// A bf16 block holds n = raw_bytes / 2 BF16 values v[0..n). Each value is rotated left by
// one bit, r = (v << 1 | v >> 15) & 0xFFFF, so that r's high byte is the 8-bit exponent and
// its low byte is the 7 mantissa bits then the sign: sign_mantissa[i] = r[i] & 0xFF, kept
// as it is (it is close to random). The exponents, which carry ~2.6 bits of entropy in
// trained (or Gaussian) weights, are coded with interleaved rANS:
//   * Symbols 0..14 stand for the bytes exponent[0..14]; symbol 15 is the escape: that
//     exponent is the next byte of `escapes`. exponent[15] is 0.
//   * freq[s] is symbol s's share of kProbScale (4096) slots; they sum to exactly 4096. The
//     slots are laid out by the alias table (alias_table.h): 16 buckets of 256 slots, each
//     shared by at most two symbols, so a decoder looks a slot up in registers.
//   * kLanes (128) coders run interleaved: value i belongs to lane i % 128, and values are
//     decoded in order i = 0, 1, ..., n-1. Lane j starts from state[j] (2^16 <= x < 2^32).
//     Decoding value i from state x:
//         slot = x & 4095;  (s, delta) = alias lookup of slot;
//         x = freq[s] * (x >> 12) + slot + delta;        exponent = s < 15 ? exponent[s] : escape
//         if x < 2^16: x = x << 16 | words[next word]
//   * A valid block uses every word and every escape, and leaves every lane's state at
//     exactly 2^16 (the encoder's starting state).
// A decoder refuses (Corruption) a block whose lengths disagree with its size, whose
// frequencies do not sum to 4096, whose states are out of range, that runs out of words or
// escapes, that leaves any unused, or that ends in another state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/util/status.h"

namespace nj {

enum class BlockType : uint8_t {
  kRaw = 0,   // the bytes as they are
  kBf16 = 1,  // BF16 values: sign and mantissa bytes as they are, exponents rANS-coded
};

inline constexpr size_t kBlockHeaderBytes = 8;
inline constexpr size_t kMaxBlockRawBytes = 16u << 20;  // a block decodes into at most this
inline constexpr int kSymbols = 16;                     // 15 exponents and the escape
inline constexpr int kEscapeSymbol = 15;
inline constexpr int kProbBits = 12;
inline constexpr uint32_t kProbScale = 1u << kProbBits;  // the frequencies' sum
inline constexpr int kLanes = 128;                       // interleaved coders
inline constexpr uint32_t kStateLow = 1u << 16;          // states live in [2^16, 2^32)
// bf16-payload bytes before sign_mantissa.
inline constexpr size_t kBf16FixedBytes = 2 * kSymbols + kSymbols + 4 * kLanes + 8;

// A stored block whose sizes have been checked against its length. Spans point into the
// stored bytes; the frequencies and states are copied out.
struct BlockView {
  BlockType type = BlockType::kRaw;
  uint32_t raw_bytes = 0;
  std::span<const uint8_t> raw;  // kRaw: the payload
  // kBf16:
  uint16_t freq[kSymbols] = {};
  uint8_t exponent[kSymbols] = {};
  uint32_t state[kLanes] = {};
  size_t values = 0;                       // n
  const uint8_t* sign_mantissa = nullptr;  // [n]
  const uint8_t* words = nullptr;          // [word_count] u16, unaligned
  size_t word_count = 0;
  const uint8_t* escapes = nullptr;  // [escape_count]
  size_t escape_count = 0;
};

// Parses and checks a stored block's header and payload sizes (not the coded streams, which
// only decoding can check). Corruption saying what is wrong.
Result<BlockView> parse_block(std::span<const uint8_t> stored);

const char* block_type_name(BlockType type);  // "raw", "bf16"

}  // namespace nj
