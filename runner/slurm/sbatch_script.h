// The array script of `nightjar slurm` (DIR/job.sbatch) and the sbatch call of --submit.
//
// One array task per shard (`#SBATCH --array=0-(N-1)`); task I, in its own home
// DIR/homes/task-I (array_manifest.h), runs
//
//   nightjar submit SPEC --shard I/N --home HOME     queues shard I once (a re-run queues
//                                                    nothing: JobStore::submit_shard)
//   nightjar run --drain --exclusive --home HOME [--until "YYYY-MM-DD HH:MM"] [--threads C]
//                                                    resumes from the home's checkpoints,
//                                                    whichever node the task lands on
//   nightjar results JOB --home HOME --out DIR/results/task-I.jsonl   (atomic)
//
// Slurm signals every process of a task and kills what is left once the script ends, so the
// script traps SIGTERM/SIGINT and waits for `run` to checkpoint and exit; a task stopped by a
// signal then exits 143 without writing results (its rerun resumes and writes them).
// N is written into the script rather than read from $SLURM_ARRAY_TASK_COUNT, so that a
// resubmission of some tasks (`sbatch --array=1 DIR/job.sbatch`) still runs shard 1 of N.
// With --time, `run` stops gracefully (checkpoint, commit, exit 0) before Slurm's limit:
// --until is the task's start + the limit - a margin (a tenth of the limit, at most 5 min),
// rounded down to the minute (at most 24 h ahead); a limit too short for that runs without
// --until.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/status.h"

namespace nj::runner {

struct SbatchOptions {
  std::string nightjar;  // the program each task runs (absolute)
  std::string spec;      // the job spec (absolute)
  std::string dir;       // the array directory (absolute)
  std::string job_name;  // --job-name (nightjar-<spec name>)
  int tasks = 1;
  std::optional<std::string> partition;
  std::optional<int64_t> time_limit_s;   // --time
  std::optional<uint64_t> memory_bytes;  // --mem, in whole MiB rounded up
  std::optional<int> cpus;               // --cpus-per-task, and run --threads
  bool requeue = false;                  // --requeue: Slurm may requeue a preempted task
  std::vector<std::string> extra;        // more sbatch options, one #SBATCH line each, last
};

// Parses Slurm's --time forms we accept: "HH:MM:SS" (hours may exceed 23), "MM:SS" is not
// accepted (ambiguous with HH:MM). InvalidArgument naming the text.
Result<int64_t> parse_time_limit(std::string_view text);
// "HH:MM:SS".
std::string format_time_limit(int64_t seconds);

// The seconds before the time limit at which `run` stops (the margin above); nullopt when
// the limit is too short to leave a whole minute to run.
std::optional<int64_t> deadline_margin_s(int64_t time_limit_s);

// The furthest --until the script gives: `run --until` refuses a date and time more than
// 24 hours away; a minute less leaves room for the task's start-up.
inline constexpr int64_t kMaxUntilAhead_s = 24 * 3600 - 60;

// InvalidArgument when a path cannot be written into the script safely: an #SBATCH line
// takes no quoting, and '%' is Slurm's file name pattern character.
Status check_script_path(const std::string& what, const std::string& path);

// The script's text.
// REQUIRES: every path passed check_script_path; tasks >= 1.
std::string sbatch_script(const SbatchOptions& options);

// Runs `sbatch --parsable SCRIPT` and returns the Slurm job id it prints. NotFound when
// sbatch is not installed; IOError with sbatch's exit status otherwise (its own message
// went to stderr).
Result<std::string> call_sbatch(const std::string& script);

}  // namespace nj::runner
