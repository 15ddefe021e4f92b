// Units of a lossless pack (pack.h): checking and decoding their stored blocks
// (engine/codec/block_format.h) into the unit's buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

// A lossless unit is read in runs of consecutive blocks, one read of up to kBlockRunBytes
// each (one block alone when it is larger): blocks are ~0.7 MB stored, and on the reference
// host one read that small moves ~0.25 GB/s against ~0.75 GB/s for a 4 MiB read, so reading
// block by block took 2.5x the raw pack's read time for 0.66 of its bytes (stream_bench
// --timeline at 420 MiB on bench-8g). The same size as the raw pack's read chunks.
inline constexpr size_t kBlockRunBytes = 4u << 20;

struct BlockRun {
  size_t first = 0;  // blocks [first, first + count)
  size_t count = 0;
  uint64_t stored_offset = 0;  // blocks[first].stored_offset (a multiple of kDirectAlign)
  uint64_t read_bytes = 0;     // to the end of the last block, aligned up to kDirectAlign
};

// The runs that read `unit`'s blocks, in order. Empty for a unit without blocks.
// REQUIRES: blocks in increasing stored_offset (as the pack writes them).
std::vector<BlockRun> block_runs(const UnitLayout& unit, size_t max_read_bytes = kBlockRunBytes);

// The longest read of block_runs(unit) (0 without blocks): one I/O thread's staging buffer.
uint64_t largest_block_run(const UnitLayout& unit);

// The bytes a unit's blocks hold (without the padding that aligns each block).
uint64_t stored_block_bytes(const UnitLayout& unit);

// What reading a unit from disk counts in the stats: its stored bytes when it has blocks,
// else its tensors' bytes.
inline uint64_t unit_bytes_read(const UnitLayout& unit) {
  return unit.blocks.empty() ? unit.tensor_bytes : stored_block_bytes(unit);
}

}  // namespace nj
