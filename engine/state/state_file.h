// State checkpoints: save a sequence's state (SequenceState plus the sampler's settings and
// RNG) to disk and restore it, in another process or on another day, so that generation
// continues with exactly the tokens the uninterrupted run would have produced.
//
// A checkpoint at PATH is two files in PATH's directory:
//   PATH              the head: header, sampler, last logits, every KDA layer's state, and
//                     the reference to the segment. Its size depends on the model, never
//                     on the context length (K3: ~465 MB, nearly all of it KDA state).
//                     Replaced atomically by write_file_durably on every save.
//   PATH.seg-<G>      the position segment: tokens and MLA latent/rope rows, append-only.
//                     A save by the same writer appends one record with only the positions
//                     since its previous save; the head then commits the longer prefix.
// A crash at any instant leaves the previous logical checkpoint loadable: the segment's
// new bytes count only once the new head (renamed into place after they are synced)
// commits them. Copying or moving a checkpoint means both files; the head may be renamed
// (it records its segment's name), the segment may not.
//
// The byte format is documented as a grammar at the top of state_file_reader.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/io/env.h"
#include "engine/model/config.h"
#include "engine/state/sampling_state.h"
#include "engine/state/sequence_state.h"
#include "engine/util/status.h"

namespace nj {

namespace state_format {
struct StateShape;
}

// The model a state belongs to: its config and its fingerprint (a hash of the config and of
// every tensor's name, dtype and shape). Made from anything with config() and
// fingerprint(), such as a Model, without the state layer depending on the model's.
struct ModelIdentity {
  const ModelConfig& config;
  uint64_t fingerprint;
  template <class M>
  ModelIdentity(const M& model)  // NOLINT(google-explicit-constructor): a Model is its identity
      : config(model.config()), fingerprint(model.fingerprint()) {}
  ModelIdentity(const ModelConfig& c, uint64_t f) : config(c), fingerprint(f) {}
};

struct SamplerSnapshot {
  SamplingParams params;  // the settings the generation runs with (seed = the initial seed)
  RngState rng;           // the RNG after the last token sampled
};

struct StateCheckpoint {
  SequenceState state;
  SamplerSnapshot sampler;
  uint32_t numerics_version = 0;  // of the binary that wrote it (0: format 1, unrecorded)
};

// What one save wrote (for logs, tests and benchmarks).
struct StateSaveStats {
  bool full = false;                 // a new generation: the whole segment was written
  uint64_t head_bytes = 0;           // bytes of the head file
  uint64_t segment_bytes = 0;        // bytes written to the segment by this save
  uint64_t segment_total_bytes = 0;  // committed length of the segment afterwards
};

// Writes successive checkpoints of one sequence to one PATH.
//
// Each save is atomic and durable when it returns OK. A save appends to the segment when
// the state extends the one this writer saved last (same model, same token prefix, and
// the last saved MLA row of every layer unchanged: the engine computes rows
// deterministically from the tokens, so the earlier rows need not be compared); otherwise
// it starts a new generation (a new segment holding every position) and removes the
// segments of older generations of PATH. It also starts a new generation after any failed
// save (the old segment's end is then unknown) and after options.max_records_per_segment
// appends (restore reads records one by one; this bounds their number).
//
// On error nothing committed changes: PATH still loads as the previous checkpoint (or is
// still absent), except when only the head's final directory fsync failed: then PATH
// already loads as the new checkpoint, which might not survive a power loss. The error
// names the failing step and file (ENOSPC → ResourceExhausted, EIO → IOError).
//
// Not thread-safe. One writer per PATH at a time (neither processes nor writers coordinate).
// `env` must outlive the writer.
struct StateFileWriterOptions {
  // Appends before the writer starts a new generation. Larger: fewer full rewrites of the
  // segment; smaller: restore issues fewer small reads (1 + 2 per MLA layer per record).
  // 1024 saves of a K3 sequence every 64 tokens span 65k positions; one full rewrite per
  // 1024 saves is noise, and 1024 records cost restore ~50k reads, well under a second.
  uint64_t max_records_per_segment = 1024;
};

class StateFileWriter {
 public:
  StateFileWriter(Env& env, std::string path, StateFileWriterOptions options = {});
  ~StateFileWriter();
  StateFileWriter(const StateFileWriter&) = delete;
  StateFileWriter& operator=(const StateFileWriter&) = delete;

  // Saves `s` and `sampler` for `model`. REQUIRES: `s` is shaped for `model` (a state from
  // a Session of this model); otherwise InvalidArgument and nothing is written.
  Status save(const ModelIdentity& model, const SequenceState& s, const SamplerSnapshot& sampler);
  // The same for a model known by its config and fingerprint (benchmarks, tests).
  Status save(const ModelConfig& config, uint64_t fingerprint, const SequenceState& s,
              const SamplerSnapshot& sampler);

  const std::string& path() const { return path_; }
  // What the last successful save wrote.
  const StateSaveStats& last_save() const { return last_; }

 private:
  struct Written;
  bool can_append(const state_format::StateShape& shape, uint64_t fingerprint,
                  const SequenceState& s) const;
  Status start_generation(const state_format::StateShape& shape, uint64_t fingerprint,
                          const SequenceState& s, StateSaveStats& stats);
  Status append_positions(const state_format::StateShape& shape, const SequenceState& s,
                          StateSaveStats& stats);
  Status write_head(const state_format::StateShape& shape, uint64_t fingerprint,
                    const SequenceState& s, const SamplerSnapshot& sampler, StateSaveStats& stats);
  void remember(const state_format::StateShape& shape, const SequenceState& s);
  void remove_stale_segments();

  Env& env_;
  std::string path_;
  StateFileWriterOptions options_;
  std::unique_ptr<Written> w_;  // what the committed checkpoint holds; null = start anew
  StateSaveStats last_;
};

// What a checkpoint's head says about itself, read without a model: to size a run or fail
// fast before a model is opened, or to list checkpoints. Verifies the magic, the version
// and the header checksum only (load_state_file verifies everything). Errors as below.
struct StateFileInfo {
  uint64_t fingerprint = 0;       // Model::fingerprint() of the model that wrote it
  int64_t position = 0;           // tokens consumed
  uint32_t numerics_version = 0;  // engine/ops/numerics.h of the writer (0: unrecorded)
};
Result<StateFileInfo> read_state_file_info(Env& env, const std::string& path);

// Which arithmetic a checkpoint may come from to be loaded.
enum class StateNumerics {
  kCurrent,  // only this binary's kNumericsVersion: the state is continued by this arithmetic
  kAny,      // any: to inspect a checkpoint, or to test the format itself
};

// Reads the checkpoint at `path` and verifies it for `model`: every section and record
// checksum, every length against the model's config (before allocating anything), the
// model fingerprint, the numerics version, and the consistency of head and segment.
// Errors, each naming the file and the reason:
//   NotFound            PATH does not exist
//   Corruption          bad magic, truncation, checksum mismatch, inconsistent lengths,
//                       a missing or foreign segment
//   FailedPrecondition  another model's checkpoint (fingerprint), an unsupported version,
//                       or (kCurrent) one computed with other engine numerics
//   IOError             the OS failed a read
// Never returns a partially verified state. The ModelIdentity overload requires kCurrent.
Result<StateCheckpoint> load_state_file(Env& env, const std::string& path, const ModelIdentity& model);
Result<StateCheckpoint> load_state_file(Env& env, const std::string& path,
                                        const ModelConfig& config, uint64_t fingerprint,
                                        StateNumerics numerics = StateNumerics::kCurrent);

}  // namespace nj
