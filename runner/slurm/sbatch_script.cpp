// The array script's text and the sbatch call (sbatch_script.h).
#include "runner/slurm/sbatch_script.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

extern char** environ;

namespace nj::runner {
namespace {

// A word for the shell: single-quoted unless plainly safe.
std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                        "0123456789_-./:=@+,") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Result<int64_t> parse_time_limit(std::string_view text) {
  const auto bad = [&] {
    return invalid_argument("time limit '" + std::string(text) + "': expected HH:MM:SS");
  };
  const size_t a = text.find(':'), b = text.rfind(':');
  if (a == text.npos || a == b || a == 0 || a > 5) return bad();
  const std::string_view h = text.substr(0, a), m = text.substr(a + 1, b - a - 1),
                         s = text.substr(b + 1);
  for (std::string_view part : {h, m, s})
    if (part.empty() || part.find_first_not_of("0123456789") != part.npos) return bad();
  if (m.size() != 2 || s.size() != 2) return bad();
  const int64_t hours = std::stoll(std::string(h)), minutes = std::stoll(std::string(m)),
                seconds = std::stoll(std::string(s));
  if (minutes > 59 || seconds > 59) return bad();
  const int64_t total = hours * 3600 + minutes * 60 + seconds;
  if (total == 0) return invalid_argument("time limit '" + std::string(text) + "' is zero");
  return total;
}

std::string format_time_limit(int64_t seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
  return buf;
}

std::optional<int64_t> deadline_margin_s(int64_t time_limit_s) {
  const int64_t margin = std::min<int64_t>(300, time_limit_s / 10);
  // --until has minute resolution and is rounded down: keep at least one whole minute.
  if (time_limit_s - margin < 120) return std::nullopt;
  return margin;
}

Status check_script_path(const std::string& what, const std::string& path) {
  if (path.find_first_of(" \t\r\n%'\"\\$`") != std::string::npos)
    return invalid_argument(what + " '" + path +
                            "': the array script cannot name a path with whitespace, quotes, "
                            "'$', '`', '\\' or '%' (Slurm's file name patterns)");
  return Status();
}

std::string sbatch_script(const SbatchOptions& o) {
  std::string s;
  s += "#!/bin/bash\n";
  s += "# Written by `nightjar slurm` for " + o.spec + ".\n";
  s += "# One array task per shard of the job's items (shard = xxh64(custom_id) mod " +
       std::to_string(o.tasks) + ").\n";
  s += "# Task I queues its shard once in its own home, runs it to the end (resuming from the\n";
  s += "# home's checkpoints when requeued or resubmitted) and writes results/task-I.jsonl;\n";
  s += "# `nightjar merge " + o.dir + "` merges them. See deploy/slurm/README.md.\n";
  s += "#SBATCH --job-name=" + o.job_name + "\n";
  s += "#SBATCH --array=0-" + std::to_string(o.tasks - 1) + "\n";
  s += "#SBATCH --output=" + o.dir + "/logs/task-%a.out\n";
  s += "#SBATCH --open-mode=append\n";
  if (o.partition) s += "#SBATCH --partition=" + *o.partition + "\n";
  if (o.time_limit_s) s += "#SBATCH --time=" + format_time_limit(*o.time_limit_s) + "\n";
  if (o.memory_bytes) {
    const uint64_t mib = (*o.memory_bytes + (1u << 20) - 1) >> 20;
    s += "#SBATCH --mem=" + std::to_string(mib) + "M\n";
  }
  if (o.cpus) s += "#SBATCH --cpus-per-task=" + std::to_string(*o.cpus) + "\n";
  if (o.requeue) s += "#SBATCH --requeue\n";
  for (const std::string& e : o.extra) s += "#SBATCH " + e + "\n";
  s += "set -euo pipefail\n\n";
  s += "nightjar=" + shell_word(o.nightjar) + "\n";
  s += "spec=" + shell_word(o.spec) + "\n";
  s += "dir=" + shell_word(o.dir) + "\n";
  s += "tasks=" + std::to_string(o.tasks) + "\n";
  s += "task=${SLURM_ARRAY_TASK_ID:?job.sbatch runs as a Slurm array task (sbatch --array)}\n";
  s += "home=\"$dir/homes/task-$task\"\n";
  s += "echo \"nightjar task $task of $tasks on $(hostname) at $(date -u +%FT%TZ) "
       "(Slurm job ${SLURM_JOB_ID:-?}, restart ${SLURM_RESTART_COUNT:-0})\"\n\n";
  s +=
      "# Slurm signals every process of the task (scancel, preemption, the time limit) and kills\n";
  s += "# what is left as soon as this script ends: so the script outlives `run`, which finishes\n";
  s += "# the token in flight, checkpoints and exits; a stopped task writes no results.\n";
  s += "stopped=0\n";
  s += "trap 'stopped=1' TERM INT\n";
  s += "job=$(\"$nightjar\" submit \"$spec\" --shard \"$task/$tasks\" --home \"$home\")\n";
  s += "run_args=()\n";
  if (o.time_limit_s) {
    if (auto margin = deadline_margin_s(*o.time_limit_s)) {
      s += "# --time " + format_time_limit(*o.time_limit_s) + ": stop gracefully " +
           std::to_string(*margin) + " s before Slurm's limit.\n";
      // The full date and time: an HH:MM within the hour before the start would be refused
      // (run: "just passed"), and one more than a day ahead would wrap. `run --until` takes
      // at most 24 h, so a longer limit stops after a day (its items stay queued).
      const int64_t until_s = std::min<int64_t>(*o.time_limit_s - *margin, kMaxUntilAhead_s);
      s += "run_args+=(--until \"$(date -d \"@$(( $(date +%s) + " + std::to_string(until_s) +
           " ))\" \"+%Y-%m-%d %H:%M\")\")\n";
    }
  }
  if (o.cpus) s += "run_args+=(--threads " + std::to_string(*o.cpus) + ")\n";
  s += "# run exits 4 when items failed for good: their records say so, and the task's results\n";
  s += "# are written all the same (the task then exits 4); any other failure ends the task.\n";
  s += "rc=0\n";
  s += "\"$nightjar\" run --drain --exclusive --home \"$home\" \"${run_args[@]}\" || rc=$?\n";
  s += "if [ \"$rc\" != 0 ] && [ \"$rc\" != 4 ]; then exit \"$rc\"; fi\n";
  s += "if [ \"$stopped\" = 1 ]; then\n";
  s += "  echo \"nightjar task $task stopped by a signal: checkpointed; a requeue or rerun "
       "resumes\"\n";
  s += "  exit 143\n";
  s += "fi\n";
  s += "\"$nightjar\" results \"$job\" --home \"$home\" --out \"$dir/results/task-$task.jsonl\"\n";
  s += "exit \"$rc\"\n";
  return s;
}

Result<std::string> call_sbatch(const std::string& script) {
  int out[2];
  if (::pipe(out) != 0) return io_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  const char* argv[] = {"sbatch", "--parsable", script.c_str(), nullptr};
  pid_t pid = 0;
  const int rc =
      ::posix_spawnp(&pid, "sbatch", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    if (rc == ENOENT) return not_found("sbatch: not found (is Slurm installed on this host?)");
    return io_error(std::string("sbatch: cannot start: ") + std::strerror(rc));
  }
  std::string text;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return io_error("sbatch " + script + " failed (exit status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  const size_t end = text.find_first_of(";\r\n");
  const std::string id = text.substr(0, end);
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    return io_error("sbatch printed no job id (it printed '" + text + "')");
  return id;
}

}  // namespace nj::runner
