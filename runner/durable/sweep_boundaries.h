// A layer sweep's boundaries on disk (engine/sweep/sweep.h, SweepProgress). At K3's size a
// window of documents is hours of work, so the sweep saves what crosses a layer boundary
// (every row's residual stream and attention-residual bank entries) at most every
// `interval_s` of work and whenever the run is stopping (a signal, --until); a sweep of the
// same window after a crash or a stop starts at the last saved layer instead of layer 0.
//
//   <home>/checkpoints/sweep-j<job>-<key>   one file per window, by write_file_durably
//
// <job> is the window's first document's job, <key> a hash of the window (each sequence's
// parent, start tokens and tokens, in order: the same items claimed again in the same order
// form the same window). The file is a cache: one that is missing, damaged or for another
// window, model or numerics version starts the sweep at layer 0. It is removed when its
// sweep completes, and with the job's other files when the job has nothing queued or running.
//
// Format 1, little-endian:
//   magic "NJSWEEP1" | u32 format | u32 numerics version | u64 model fingerprint |
//   u64 window key | u32 layer | u32 rows | u32 hidden | u32 banked |
//   f32 h [rows][hidden] | f32 bank [banked][rows][hidden] | u64 xxh3 of everything before
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "engine/io/env.h"
#include "engine/sweep/sweep.h"
#include "engine/util/status.h"

namespace nj::runner {

// What a run keeps of its sweeps' boundaries.
struct SweepKeeping {
  std::string home_dir;
  uint64_t model_fingerprint = 0;
  double interval_s = 120;     // the most work a crash costs (one boundary file per save)
  std::function<bool()> stop;  // true once the run is stopping: save and stop at the boundary
};

class SweepBoundaries : public SweepProgress {
 public:
  // `env` must outlive this object.
  SweepBoundaries(Env& env, const SweepKeeping& keeping, int64_t job_id, uint64_t window_key);

  // The key of a window: its sequences' parents, start tokens and tokens, in order.
  static uint64_t window_key(std::span<const SweepSequence> window);
  // Relative path (under the home) of a window's file.
  static std::string path(int64_t job_id, uint64_t window_key);

  Status resume(SweepBoundary& b) override;
  bool at_boundary(const SweepBoundary& b) override;

  // The sweep completed: its file is of no more use.
  void remove();
  // Removes every boundary file of `job_id` (best effort).
  static void remove_job(Env& env, const std::string& home_dir, int64_t job_id);

  // What this sweep did with its file.
  int resumed_layer() const { return resumed_layer_; }
  int saves() const { return saves_; }
  uint64_t saved_bytes() const { return saved_bytes_; }
  double save_s() const { return save_s_; }

 private:
  Status save(const SweepBoundary& b);
  Status load(SweepBoundary& b);

  Env& env_;
  const SweepKeeping& keeping_;
  std::string path_;  // absolute
  uint64_t key_;
  double last_save_ = 0;  // steady-clock seconds of the sweep's start or last save
  int resumed_layer_ = 0;
  int saves_ = 0;
  uint64_t saved_bytes_ = 0;
  double save_s_ = 0;
  int kill_at_ = 0;  // NIGHTJAR_TEST_SWEEP_KILL_AT: SIGKILL itself after saving that layer
};

}  // namespace nj::runner
