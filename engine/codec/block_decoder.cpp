// Block decoding: parse, dispatch to the SIMD level's loop, check the block was used up.
#include "engine/codec/block_decoder.h"

#include <cstring>

#include "engine/codec/alias_table.h"
#include "engine/codec/bf16_kernels.h"
#include "engine/codec/block_format.h"

namespace nj {

Status decode_block(std::span<const uint8_t> stored, std::span<uint8_t> dst) {
  return decode_block(stored, dst, active_simd_level());
}

Status decode_block(std::span<const uint8_t> stored, std::span<uint8_t> dst, SimdLevel level) {
  NJ_ASSIGN_OR_RETURN(BlockView b, parse_block(stored));
  if (b.raw_bytes != dst.size())
    return corruption(std::string(block_type_name(b.type)) + " block decodes to " +
                      std::to_string(b.raw_bytes) + " bytes, its place holds " +
                      std::to_string(dst.size()));
  if (b.type == BlockType::kRaw) {
    if (!dst.empty()) std::memcpy(dst.data(), b.raw.data(), dst.size());
    return Status();
  }
  const AliasTable table = build_alias_table(b.freq);
  Bf16Cursor c;
  std::memcpy(c.state, b.state, sizeof c.state);
  Bf16Fault fault;
  switch (level) {
    case SimdLevel::kAvx512:
      fault = decode_bf16_avx512(b, table, &c, dst.data());
      break;
    case SimdLevel::kAvx2:
      fault = decode_bf16_avx2(b, table, &c, dst.data());
      break;
    default:
      fault = decode_bf16_scalar(b, table, &c, dst.data());
      break;
  }
  const std::string at =
      " (value " + std::to_string(c.value) + " of " + std::to_string(b.values) + ")";
  if (fault == Bf16Fault::kWordsExhausted)
    return corruption("bf16 block runs out of coded words" + at);
  if (fault == Bf16Fault::kEscapesExhausted)
    return corruption("bf16 block runs out of escape bytes" + at);
  if (c.word != b.word_count)
    return corruption("bf16 block leaves " + std::to_string(b.word_count - c.word) + " of its " +
                      std::to_string(b.word_count) + " coded words unused");
  if (c.escape != b.escape_count)
    return corruption("bf16 block leaves " + std::to_string(b.escape_count - c.escape) +
                      " of its " + std::to_string(b.escape_count) + " escape bytes unused");
  for (int j = 0; j < kLanes; ++j)
    if (c.state[j] != kStateLow)
      return corruption("bf16 block's lane " + std::to_string(j) + " ends in state " +
                        std::to_string(c.state[j]) + ", not 2^16 (the coded bytes are damaged)");
  return Status();
}

}  // namespace nj
