// The runner's door to the engine's state checkpoint files (engine/state/state_file.h).
//
// Each running item has one checkpoint, <home>/checkpoints/item-<id>/state (the head,
// replaced atomically on every save) plus its append-only position segment state.seg-<G>
// beside it. An ItemCheckpointWriter keeps the segment across the saves of one attempt, so a
// save writes the recurrent state plus only the positions since the previous save.
// The store records a checkpoint's row only after save() has returned OK.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/io/env.h"
#include "engine/runtime/model.h"
#include "engine/session/sampler.h"
#include "engine/state/sequence_state.h"
#include "engine/util/status.h"

namespace nj {
class StateFileWriter;
}

namespace nj::runner {

struct LoadedCheckpoint {
  SequenceState state;
  SamplingParams params;
  RngState rng;
};

// Saves the checkpoints of one item. Not thread-safe; one per item at a time.
class ItemCheckpointWriter {
 public:
  ItemCheckpointWriter(Env& env, std::string path);
  ~ItemCheckpointWriter();
  // Durably writes the state and the sampler (see StateFileWriter::save). Returns the bytes
  // written by this save. On error the previous checkpoint still loads.
  Result<uint64_t> save(const Model& model, const SequenceState& state, const Sampler& sampler);

 private:
  std::unique_ptr<StateFileWriter> writer_;
};

class StateCheckpoints {
 public:
  // Files live under `home_dir`. `env` (default: the POSIX one) must outlive this object.
  explicit StateCheckpoints(std::string home_dir, Env* env = Env::posix());

  // Relative path (as the store records it) of an item's checkpoint head.
  static std::string item_path(int64_t item_id);

  // A writer for the item's checkpoint, creating its directory.
  Result<std::unique_ptr<ItemCheckpointWriter>> writer(int64_t item_id);

  // Reads and verifies the checkpoint at `relative_path` for `model`: NotFound when missing,
  // Corruption or FailedPrecondition (another model) naming the file otherwise.
  Result<LoadedCheckpoint> load(const std::string& relative_path, const Model& model);

  // Removes every file of the item's checkpoint and its directory (best effort: a leftover
  // file is harmless; the next save of the item replaces or removes it).
  void remove_item(int64_t item_id);

  const std::string& home_dir() const { return home_dir_; }

 private:
  std::string home_dir_;
  Env* env_;
};

}  // namespace nj::runner
