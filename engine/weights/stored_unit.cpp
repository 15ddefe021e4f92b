// Checking and decoding a lossless unit's blocks (see stored_unit.h).
#include "engine/weights/stored_unit.h"

#include <xxhash.h>

#include <algorithm>

#include "engine/codec/block_decoder.h"
#include "engine/io/file.h"

namespace nj {
namespace {

std::string where(const UnitLayout& unit, size_t k, const std::string& pack_path) {
  const uint64_t at =
      (unit.extents.empty() ? 0 : unit.extents[0].file_offset) + unit.blocks[k].stored_offset;
  return pack_path + ": unit " + std::to_string(unit.pack_unit) + ", block " + std::to_string(k) +
         " of " + std::to_string(unit.blocks.size()) + " (at offset " + std::to_string(at) + ")";
}

}  // namespace

Status verify_unit_block(const UnitLayout& unit, size_t k, std::span<const uint8_t> stored,
                         const std::string& pack_path) {
  const StoredBlock& b = unit.blocks[k];
  if (XXH3_64bits(stored.data(), b.stored_bytes) == b.xxh3) return Status();
  return corruption(
      where(unit, k, pack_path) +
      " fails its checksum (the pack is damaged: rerun `nightjar pack`, or delete it to read the "
      "shards)");
}

Status decode_unit_block(const UnitLayout& unit, size_t k, std::span<const uint8_t> stored,
                         bool verify, const std::string& pack_path, uint8_t* buffer) {
  const StoredBlock& b = unit.blocks[k];
  if (stored.size() < b.stored_bytes)
    return internal_error(where(unit, k, pack_path) + ": given " + std::to_string(stored.size()) +
                          " of its " + std::to_string(b.stored_bytes) + " bytes");
  stored = stored.first(b.stored_bytes);
  if (verify) NJ_RETURN_IF_ERROR(verify_unit_block(unit, k, stored, pack_path));
  Status s = decode_block(stored, std::span<uint8_t>(buffer + b.raw_offset, b.raw_bytes));
  if (!s.ok()) return corruption(where(unit, k, pack_path) + ": " + s.message());
  return Status();
}

Status decode_unit(const UnitLayout& unit, std::span<const uint8_t> stored_run, bool verify,
                   const std::string& pack_path, uint8_t* buffer) {
  for (size_t k = 0; k < unit.blocks.size(); ++k) {
    const StoredBlock& b = unit.blocks[k];
    if (b.stored_offset + b.stored_bytes > stored_run.size())
      return internal_error(where(unit, k, pack_path) + ": lies past the unit's stored run");
    NJ_RETURN_IF_ERROR(decode_unit_block(
        unit, k, stored_run.subspan(b.stored_offset, b.stored_bytes), verify, pack_path, buffer));
  }
  return Status();
}

std::vector<BlockRun> block_runs(const UnitLayout& unit, size_t max_read_bytes) {
  std::vector<BlockRun> runs;
  for (size_t k = 0; k < unit.blocks.size(); ++k) {
    const StoredBlock& b = unit.blocks[k];
    const uint64_t end = align_up(b.stored_offset + b.stored_bytes, kDirectAlign);
    if (!runs.empty() && end - runs.back().stored_offset <= max_read_bytes) {
      runs.back().count++;
      runs.back().read_bytes = end - runs.back().stored_offset;
      continue;
    }
    runs.push_back(BlockRun{k, 1, b.stored_offset, end - b.stored_offset});
  }
  return runs;
}

uint64_t largest_block_run(const UnitLayout& unit) {
  uint64_t largest = 0;
  for (const BlockRun& r : block_runs(unit)) largest = std::max(largest, r.read_bytes);
  return largest;
}

uint64_t stored_block_bytes(const UnitLayout& unit) {
  uint64_t n = 0;
  for (const StoredBlock& b : unit.blocks) n += b.stored_bytes;
  return n;
}

}  // namespace nj
