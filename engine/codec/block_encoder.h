// Encoding a run of bytes as one lossless block (format in block_format.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/codec/block_format.h"

namespace nj {

struct BlockEncodeOptions {
  // Try the bf16 coding (the bytes are BF16 values, or mostly are). Off: store raw.
  bool try_bf16 = true;
  // Keep the bf16 coding only when it is smaller than raw. Tests turn this off to make
  // blocks of every type from any data.
  bool raw_if_smaller = true;
};

// Appends one block holding `raw` to *out and returns its type. Deterministic: the same
// bytes and options give the same block. REQUIRES: raw.size() <= kMaxBlockRawBytes; for a
// forced bf16 block (raw_if_smaller off), raw.size() is even and not 0.
BlockType encode_block(std::span<const uint8_t> raw, const BlockEncodeOptions& options,
                       std::vector<uint8_t>* out);

}  // namespace nj
