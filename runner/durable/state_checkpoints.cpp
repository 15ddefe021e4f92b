// StateCheckpoints: per-item checkpoint paths over the engine's state files.
#include "runner/durable/state_checkpoints.h"

#include "engine/io/lock_file.h"
#include "engine/state/state_file.h"
#include "runner/store/home.h"

namespace nj::runner {

ItemCheckpointWriter::ItemCheckpointWriter(Env& env, std::string path)
    : writer_(std::make_unique<StateFileWriter>(env, std::move(path))) {}

ItemCheckpointWriter::~ItemCheckpointWriter() = default;

Result<uint64_t> ItemCheckpointWriter::save(const Model& model, const SequenceState& state,
                                            const Sampler& sampler) {
  NJ_RETURN_IF_ERROR(writer_->save(model, state, SamplerSnapshot{sampler.params(), sampler.rng()}));
  return writer_->last_save().head_bytes + writer_->last_save().segment_bytes;
}

StateCheckpoints::StateCheckpoints(std::string home_dir, Env* env)
    : home_dir_(std::move(home_dir)), env_(env) {}

std::string StateCheckpoints::item_path(int64_t item_id) {
  return Home::checkpoint_dir(item_id) + "/state";
}

Result<std::unique_ptr<ItemCheckpointWriter>> StateCheckpoints::writer(int64_t item_id) {
  for (const std::string& dir :
       {home_dir_ + "/checkpoints", home_dir_ + "/" + Home::checkpoint_dir(item_id)}) {
    NJ_RETURN_IF_ERROR(make_directory(dir, "the checkpoint directory"));
  }
  return std::make_unique<ItemCheckpointWriter>(*env_, home_dir_ + "/" + item_path(item_id));
}

Result<LoadedCheckpoint> StateCheckpoints::load(const std::string& relative_path,
                                                const Model& model) {
  NJ_ASSIGN_OR_RETURN(StateCheckpoint cp,
                      load_state_file(*env_, home_dir_ + "/" + relative_path, model));
  return LoadedCheckpoint{std::move(cp.state), cp.sampler.params, cp.sampler.rng};
}

void StateCheckpoints::remove_item(int64_t item_id) {
  const std::string dir = home_dir_ + "/" + Home::checkpoint_dir(item_id);
  auto names = env_->children(dir);
  if (names.ok())
    for (const auto& name : *names) (void)env_->remove(dir + "/" + name);
  remove_empty_directory(dir);
}

}  // namespace nj::runner
