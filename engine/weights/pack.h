// The packed trunk: every trunk unit's tensors (a layer's non-expert tensors, and the head)
// in one 4 KiB-aligned run, so that a unit is one sequential read however the model files
// was laid out. Experts are never packed: they stay in the shards (each expert is already
// one contiguous run there). With the lossless codec (the default) each run is stored as
// independent blocks that decode to exactly its bytes (engine/codec/block_format.h): BF16
// weights take ~2/3 of their size, so a unit reads fewer bytes for the same bits.
//
// Files (in the model directory, or another one given to `nightjar pack --out`):
//   nightjar-trunk.pack           units, each starting at a multiple of 4096
//   nightjar-trunk.manifest.json  manifest, below
//
//   manifest  := { "format": "nightjar-trunk-pack", "version": 2, "codec": codec,
//                  "model_fingerprint": hex, "source_files": [{"name", "size", "mtime_ns"}...],
//                  "pack_file": name, "pack_bytes": n, "raw_bytes": n, "units": [unit...] }
//   codec     := "raw" | "lossless"
//   unit      := { "unit": u, "offset": o, "length": n, "xxh3": hex, "tensors": [tensor...] }
//                plus, for "lossless": "raw_length": r, "blocks": [block...]
//   tensor    := { "name": t, "offset": offset within the unit's run (64-byte aligned) }
//   block     := [ stored_offset, stored_bytes, raw_bytes, xxh3 hex ]
//
// A unit's run is its tensors, BF16 ones first, each at a 64-byte boundary; "raw_bytes" sums
// the runs' lengths. With "raw" the unit's `length` bytes at `offset` are the run and `xxh3`
// is the run's hash. With "lossless" they are the blocks: block i holds run bytes
// [sum of raw_bytes before it, + raw_bytes) in stored_bytes bytes at offset + stored_offset
// (a multiple of 4096; zeros pad each block to the next), `xxh3` being the block's hash;
// the unit's `xxh3` is the hash of its blocks' hashes (as little-endian u64s), so each
// unit's stored bytes are covered block by block and a flipped byte names its block.
// Blocks are at most 16 MiB raw (the writer uses 1 MiB). A version 1 manifest (no "codec")
// is a raw pack and is still read.
//
// The manifest is written last, by the durable-write recipe, after the pack is durable;
// an interrupted `pack` leaves no manifest (an older one is removed first), so nothing
// half-written is ever used. On open a pack is used only if its manifest matches the
// model (fingerprint, source file sizes and modification times, the units' tensors) and
// the pack file's size, and its units and blocks are consistent; otherwise it is ignored
// with a warning naming the reason. Each unit (raw) or block (lossless) is checked against
// its xxh3 when first read in a process; a mismatch, or a block that does not decode,
// stops the run (Corruption naming the pack, the unit and the block).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/env.h"
#include "engine/model/layout.h"
#include "engine/model/tensor_index.h"
#include "engine/util/status.h"

namespace nj {

inline constexpr const char* kPackFile = "nightjar-trunk.pack";
inline constexpr const char* kPackManifest = "nightjar-trunk.manifest.json";

enum class PackCodec { kRaw, kLossless };
const char* pack_codec_name(PackCodec codec);  // "raw", "lossless"
Result<PackCodec> parse_pack_codec(const std::string& name);

struct PackOptions {
  PackCodec codec = PackCodec::kLossless;
  // Raw bytes per lossless block: large enough that the 4 KiB alignment of each block
  // costs ~0.3 % and a block decodes in ~0.1 ms; small enough that each I/O thread's
  // staging buffer (one stored block) is a small part of the budget.
  size_t block_raw_bytes = 1u << 20;
};

struct PackStats {
  PackCodec codec = PackCodec::kLossless;
  uint64_t units = 0;
  uint64_t pack_bytes = 0;              // the pack file: everything a full pass reads
  uint64_t raw_bytes = 0;               // the units' runs, uncompressed
  uint64_t stored_bytes = 0;            // what the units take in the pack (= pack_bytes)
  uint64_t blocks = 0, raw_blocks = 0;  // lossless: blocks, and those stored as they are
  double seconds = 0;
};

// Writes the pack of the model opened as (index, layout) into `out_dir`. Reads every trunk
// unit once. Errors name the file and step; on error nothing in out_dir is left usable
// (no manifest).
Result<PackStats> write_trunk_pack(Env& env, const TensorIndex& index,
                                   const ModelLayout& layout, const std::string& out_dir,
                                   const PackOptions& options = {});

// Looks for a pack in `dir` and, when it is valid for this model, switches the layout's
// trunk units to it (their file becomes `pack_file_id`). Returns true when the pack is in
// use, false when there is none; a pack that is present but stale, foreign or damaged
// is not used, and `reason` says why (for a warning).
Result<bool> use_trunk_pack(Env& env, const std::string& dir, const TensorIndex& index,
                            ModelLayout* layout, uint32_t pack_file_id, std::string* reason);

// For the writer and the reader: the trunk units in pack order (layers, then the head),
// and the tensor slots of each that are present.
std::vector<std::vector<TensorSlot*>> pack_units(ModelLayout& layout);
UnitLayout& pack_unit_layout(ModelLayout& layout, int u);

}  // namespace nj
