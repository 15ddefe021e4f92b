// The directory of a Slurm array job (`nightjar slurm SPEC --tasks N --out DIR`) and its
// manifest, DIR/array.json: what the array's job is and which task owns which item, so that
// `nightjar merge DIR` can name every item that is missing and `nightjar report DIR` can
// read every task's home.
//
//   DIR/array.json               the manifest (below), written by `nightjar slurm`
//   DIR/job.sbatch               the array script (sbatch_script.h)
//   DIR/homes/task-I/            task I's home (runner/home.h): its own store, checkpoints
//   DIR/results/task-I.jsonl     task I's results (result_record.h), written atomically
//   DIR/logs/task-I.out          task I's output (sbatch --output, appended on requeue)
//
// The manifest, one JSON object:
//
//   {"format": 1,
//    "spec": PATH,                        the job spec (absolute)
//    "name": TEXT, "kind": "generate" | "classify",
//    "model_dir": PATH,                   the job's model (absolute)
//    "settings": {...},                   the job's stored settings (jobs/job_spec.h)
//    "tasks": N,                          1..jobs::kMaxShards
//    "items": [{"custom_id": TEXT, "task": I}, ...]}
//                                         every item of the job once, in spec order;
//                                         I = jobs::shard_of(custom_id, N)
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"

namespace nj::runner {

struct ArrayItem {
  std::string custom_id;
  int task = 0;
};

struct ArrayManifest {
  std::string spec;
  std::string name;
  std::string kind;
  std::string model_dir;
  nlohmann::json settings;
  int tasks = 1;
  std::vector<ArrayItem> items;  // spec order

  nlohmann::json to_json() const;
};

// Paths inside an array directory (above).
std::string array_manifest_path(const std::string& dir);
std::string array_home(const std::string& dir, int task);
std::string array_results_path(const std::string& dir, int task);

// Reads and checks DIR/array.json: NotFound when absent ("not written by `nightjar slurm`?"),
// Corruption naming the file and key when it does not follow the format above (a missing
// key, a duplicate custom_id, an item in the wrong task).
Result<ArrayManifest> read_array_manifest(const std::string& dir);

// Writes DIR/array.json durably (write_file_durably). IOError naming the file.
Status write_array_manifest(const std::string& dir, const ArrayManifest& manifest);

}  // namespace nj::runner
