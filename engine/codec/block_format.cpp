// Parsing a stored block's header and sizes (the grammar is in block_format.h).
#include "engine/codec/block_format.h"

#include <cstring>

namespace nj {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

const char* block_type_name(BlockType type) {
  switch (type) {
    case BlockType::kRaw:
      return "raw";
    case BlockType::kBf16:
      return "bf16";
  }
  return "unknown";
}

Result<BlockView> parse_block(std::span<const uint8_t> stored) {
  if (stored.size() < kBlockHeaderBytes)
    return corruption("block of " + std::to_string(stored.size()) + " bytes is shorter than its " +
                      std::to_string(kBlockHeaderBytes) + "-byte header");
  const uint8_t* p = stored.data();
  BlockView v;
  if (p[0] > static_cast<uint8_t>(BlockType::kBf16))
    return corruption("unknown block type " + std::to_string(p[0]));
  if (p[1] || p[2] || p[3]) return corruption("block header's reserved bytes are not zero");
  v.type = static_cast<BlockType>(p[0]);
  v.raw_bytes = load_u32(p + 4);
  if (v.raw_bytes > kMaxBlockRawBytes)
    return corruption("block claims " + std::to_string(v.raw_bytes) +
                      " raw bytes, more than the limit of " + std::to_string(kMaxBlockRawBytes));
  const std::span<const uint8_t> payload = stored.subspan(kBlockHeaderBytes);
  if (v.type == BlockType::kRaw) {
    if (payload.size() != v.raw_bytes)
      return corruption("raw block holds " + std::to_string(payload.size()) +
                        " bytes, its header says " + std::to_string(v.raw_bytes));
    v.raw = payload;
    return v;
  }
  if (v.raw_bytes == 0 || v.raw_bytes % 2)
    return corruption("bf16 block of " + std::to_string(v.raw_bytes) +
                      " raw bytes (must be even and not 0)");
  if (payload.size() < kBf16FixedBytes)
    return corruption("bf16 block's payload of " + std::to_string(payload.size()) +
                      " bytes is shorter than its " + std::to_string(kBf16FixedBytes) +
                      "-byte tables");
  const uint8_t* q = payload.data();
  uint32_t sum = 0;
  for (int s = 0; s < kSymbols; ++s) {
    v.freq[s] = load_u16(q + 2 * s);
    sum += v.freq[s];
  }
  q += 2 * kSymbols;
  if (sum != kProbScale)
    return corruption("bf16 block's frequencies sum to " + std::to_string(sum) + ", not " +
                      std::to_string(kProbScale));
  std::memcpy(v.exponent, q, kSymbols);
  q += kSymbols;
  if (v.exponent[kEscapeSymbol] != 0) return corruption("bf16 block's escape entry is not zero");
  for (int j = 0; j < kLanes; ++j) {
    v.state[j] = load_u32(q + 4 * j);
    if (v.state[j] < kStateLow)
      return corruption("bf16 block's lane " + std::to_string(j) + " starts in state " +
                        std::to_string(v.state[j]) + ", below 2^16");
  }
  q += 4 * kLanes;
  v.word_count = load_u32(q);
  v.escape_count = load_u32(q + 4);
  q += 8;
  v.values = v.raw_bytes / 2;
  // 64-bit sums: the counts are untrusted 32-bit values.
  const uint64_t need =
      uint64_t{kBf16FixedBytes} + v.values + 2 * uint64_t{v.word_count} + v.escape_count;
  if (need != payload.size())
    return corruption("bf16 block's payload is " + std::to_string(payload.size()) +
                      " bytes, its counts (" + std::to_string(v.values) + " values, " +
                      std::to_string(v.word_count) + " words, " + std::to_string(v.escape_count) +
                      " escapes) make " + std::to_string(need));
  if (v.escape_count > v.values)
    return corruption("bf16 block has " + std::to_string(v.escape_count) + " escapes for " +
                      std::to_string(v.values) + " values");
  v.sign_mantissa = q;
  v.words = q + v.values;
  v.escapes = v.words + 2 * v.word_count;
  return v;
}

}  // namespace nj
