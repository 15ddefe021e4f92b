// PrefixStates: per-job prefix state files over the engine's state checkpoints.
#include "runner/durable/prefix_states.h"

#include <algorithm>

#include "engine/state/state_file.h"

namespace nj::runner {

PrefixStates::PrefixStates(std::string home_dir, Env* env)
    : home_dir_(std::move(home_dir)), env_(env) {}

std::string PrefixStates::job_path(int64_t job_id) {
  return "prefixes/job-" + std::to_string(job_id) + "/state";
}

Result<std::string> PrefixStates::job_dir(int64_t job_id) {
  const std::string dir = home_dir_ + "/prefixes/job-" + std::to_string(job_id);
  for (const std::string& d : {home_dir_ + "/prefixes", dir})
    NJ_RETURN_IF_ERROR(make_directory(d, "the prefix state directory"));
  return dir;
}

Result<SequenceState> PrefixStates::load(int64_t job_id, const Model& model,
                                         std::span<const int32_t> prefix) {
  const std::string path = home_dir_ + "/" + job_path(job_id);
  NJ_ASSIGN_OR_RETURN(StateCheckpoint cp, load_state_file(*env_, path, model));
  const SequenceState& s = cp.state;
  if (s.position != static_cast<int64_t>(prefix.size()) || s.tokens.size() != prefix.size() ||
      !std::equal(prefix.begin(), prefix.end(), s.tokens.begin()))
    return corruption(path + ": holds another sequence than the job's template prefix (" +
                      std::to_string(s.position) + " tokens, expected " +
                      std::to_string(prefix.size()) + ")");
  return std::move(cp.state);
}

Result<uint64_t> PrefixStates::save(int64_t job_id, const Model& model,
                                    const SequenceState& state) {
  NJ_ASSIGN_OR_RETURN(std::string dir, job_dir(job_id));
  (void)dir;
  StateFileWriter writer(*env_, home_dir_ + "/" + job_path(job_id));
  NJ_RETURN_IF_ERROR(writer.save(model, state, SamplerSnapshot{}));
  return writer.last_save().head_bytes + writer.last_save().segment_bytes;
}

Result<PrefixLock> PrefixStates::lock(int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(std::string dir, job_dir(job_id));
  NJ_ASSIGN_OR_RETURN(LockFile file, lock_file_exclusive(dir + "/lock"));
  return PrefixLock(std::move(file));
}

void PrefixStates::remove_job(int64_t job_id) {
  const std::string dir = home_dir_ + "/prefixes/job-" + std::to_string(job_id);
  auto names = env_->children(dir);
  if (names.ok())
    for (const auto& name : *names) (void)env_->remove(dir + "/" + name);
  remove_empty_directory(dir);
}

}  // namespace nj::runner
