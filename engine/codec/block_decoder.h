// Decoding one stored lossless block (format in block_format.h) into its raw bytes.
#pragma once

#include <cstdint>
#include <span>

#include "engine/ops/cpu.h"
#include "engine/util/status.h"

namespace nj {

// Decodes `stored` into `dst`, which must be exactly the block's raw size. Corruption
// saying what is wrong when the block is malformed (bad lengths or tables, codes past the
// end of a stream, streams not used up, a wrong final state); it never reads outside
// `stored` or writes outside `dst`, but dst's contents are undefined after an error.
// Thread-safe. Uses the active SIMD level (ops/cpu.h), or `level` (REQUIRES: supported).
Status decode_block(std::span<const uint8_t> stored, std::span<uint8_t> dst);
Status decode_block(std::span<const uint8_t> stored, std::span<uint8_t> dst, SimdLevel level);

}  // namespace nj
