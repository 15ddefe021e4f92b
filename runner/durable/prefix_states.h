// The saved state after a classify job's fixed template prefix: prefilled once per job and
// restored for every document (the engine's state checkpoint format, engine/state/).
//
//   <home>/prefixes/job-<id>/state        the checkpoint head (+ state.seg-* beside it)
//   <home>/prefixes/job-<id>/lock         flock(2)ed while a process prefills and saves it,
//                                         so concurrent `run`s prefill a job's prefix once
//
// The file is a cache: one that is missing, damaged, for another model or for other tokens
// is prefilled again. It is removed when the job has no queued or running items left.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>

#include "engine/io/env.h"
#include "engine/io/lock_file.h"
#include "engine/runtime/model.h"
#include "engine/state/sequence_state.h"
#include "engine/util/status.h"

namespace nj::runner {

// An exclusive lock on one job's prefix state; released on destruction (or process death).
class PrefixLock {
 public:
  explicit PrefixLock(LockFile file) : file_(std::move(file)) {}
  PrefixLock(PrefixLock&&) noexcept = default;
  PrefixLock& operator=(PrefixLock&&) = delete;
  // The destructor releases the lock.

 private:
  LockFile file_;
};

// Within one `run`, the jobs whose prefix an item of the batch is loading or prefilling
// now. The items of a batch take turns (pass_group.h), so no lock guards it; an item that
// finds its job's prefix busy skips passes until it is free, then loads the saved state
// (the file lock above is for other processes: taking it twice in one process would wait
// forever).
class PrefixGate {
 public:
  bool busy(int64_t job_id) const { return busy_.count(job_id) > 0; }
  void enter(int64_t job_id) { busy_.insert(job_id); }
  void leave(int64_t job_id) { busy_.erase(job_id); }

 private:
  std::set<int64_t> busy_;
};

class PrefixStates {
 public:
  // Files live under `home_dir`. `env` (default: the POSIX one) must outlive this object.
  explicit PrefixStates(std::string home_dir, Env* env = Env::posix());

  // Relative path (under the home) of a job's prefix state head.
  static std::string job_path(int64_t job_id);

  // The job's prefix state, verified for `model` (engine checks) and holding exactly the
  // tokens `prefix`. NotFound when absent; Corruption / FailedPrecondition naming the file
  // when unusable.
  Result<SequenceState> load(int64_t job_id, const Model& model, std::span<const int32_t> prefix);

  // Writes the state durably (replacing any previous one). Returns the bytes written.
  // REQUIRES: the caller holds lock(job_id).
  Result<uint64_t> save(int64_t job_id, const Model& model, const SequenceState& state);

  // Blocks until this process holds the job's prefix lock. IOError naming the file.
  Result<PrefixLock> lock(int64_t job_id);

  // Removes the job's prefix files and directory (best effort).
  void remove_job(int64_t job_id);

 private:
  Result<std::string> job_dir(int64_t job_id);  // creating it

  std::string home_dir_;
  Env* env_;
};

}  // namespace nj::runner
