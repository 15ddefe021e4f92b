// Units of a lossless pack (pack.h): checking and decoding their stored blocks
// (engine/codec/block_format.h) into the unit's buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/model/layout.h"
#include "engine/util/status.h"

namespace nj {

// Checks block k's stored bytes against its xxh3. Corruption naming `pack_path`, the unit
// and the block. REQUIRES: stored holds at least blocks[k].stored_bytes.
Status verify_unit_block(const UnitLayout& unit, size_t k, std::span<const uint8_t> stored,
                         const std::string& pack_path);

// Block k of `unit`: checks `stored` (its stored bytes, at least blocks[k].stored_bytes long)
// against the block's xxh3 when `verify`, then decodes it into buffer + raw_offset.
// Corruption naming `pack_path`, the unit and the block, and what is wrong. Thread-safe.
// REQUIRES: k < unit.blocks.size(); buffer holds unit.buffer_bytes.
Status decode_unit_block(const UnitLayout& unit, size_t k, std::span<const uint8_t> stored,
                         bool verify, const std::string& pack_path, uint8_t* buffer);

// Every block of `unit`, from its whole stored run in memory (the unit's one extent).
Status decode_unit(const UnitLayout& unit, std::span<const uint8_t> stored_run, bool verify,
                   const std::string& pack_path, uint8_t* buffer);

// The bytes a unit's blocks hold (without the padding that aligns each block).
uint64_t stored_block_bytes(const UnitLayout& unit);

// What reading a unit from disk counts in the stats: its stored bytes when it has blocks,
// else its tensors' bytes.
inline uint64_t unit_bytes_read(const UnitLayout& unit) {
  return unit.blocks.empty() ? unit.tensor_bytes : stored_block_bytes(unit);
}

}  // namespace nj
