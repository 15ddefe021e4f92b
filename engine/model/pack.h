// The packed trunk: every trunk unit's tensors (a layer's non-expert tensors, and the head)
// in one 4 KiB-aligned run, so that a unit is one sequential read however the model files
// was laid out. Experts are never packed: they stay in the shards (each expert is already
// one contiguous run there).
//
// Files (in the model directory, or another one given to `nightjar pack --out`):
//   nightjar-trunk.pack           runs of units, each starting at a multiple of 4096
//   nightjar-trunk.manifest.json  := { "format": "nightjar-trunk-pack", "version": 1,
//     "model_fingerprint": hex, "source_files": [{"name", "size", "mtime_ns"}...],
//     "pack_file": name, "pack_bytes": n,
//     "units": [{"unit": u, "offset": o, "length": n, "xxh3": hex,
//                "tensors": [{"name": t, "offset": offset within the run}...]}...] }
// The manifest is written last, by the durable-write recipe, after the pack is durable;
// an interrupted `pack` leaves no manifest (an older one is removed first), so nothing
// half-written is ever used. On open a pack is used only if its manifest matches the
// model (fingerprint, source file sizes and modification times, the units' tensors) and
// the pack file's size; otherwise it is ignored with a warning naming the reason. Each
// unit's bytes are checked against their xxh3 when first read in a process; a mismatch
// stops the run (Corruption naming the pack and unit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/env.h"
#include "engine/model/tensor_index.h"
#include "engine/model/layout.h"
#include "engine/util/status.h"

namespace nj {

inline constexpr const char* kPackFile = "nightjar-trunk.pack";
inline constexpr const char* kPackManifest = "nightjar-trunk.manifest.json";

struct PackStats {
  uint64_t units = 0;
  uint64_t pack_bytes = 0;
  double seconds = 0;
};

// Writes the pack of the model opened as (index, layout) into `out_dir`. Reads every trunk
// unit once. Errors name the file and step; on error nothing in out_dir is left usable
// (no manifest).
Result<PackStats> write_trunk_pack(Env& env, const TensorIndex& index, const ModelLayout& layout,
                                   const std::string& out_dir);

// Looks for a pack in `dir` and, when it is valid for this model, switches the layout's
// trunk units to it (their file becomes `pack_file_id`). Returns true when the pack is in
// use, false when there is none; a pack that is present but stale, foreign or damaged
// is not used, and `reason` says why (for a warning).
Result<bool> use_trunk_pack(Env& env, const std::string& dir, const TensorIndex& index, ModelLayout* layout,
                            uint32_t pack_file_id, std::string* reason);

}  // namespace nj
