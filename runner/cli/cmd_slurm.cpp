// `nightjar slurm SPEC.yaml --tasks N --out DIR [--submit] [--partition P] [--time HH:MM:SS]
// [--memory SIZE] [--cpus N] [--requeue] [-- extra sbatch args]`: validates the spec as
// `submit` does and writes the array directory (array_manifest.h): the manifest, the array
// script (sbatch_script.h) and the folders its tasks write into. With --submit it runs sbatch
// and prints the Slurm job id; otherwise it prints the script's path. With --output json:
// {"script", "array", "name", "tasks", "items", "submitted", "slurm_job_id"} (null unless
// submitted).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "engine/util/units.h"
#include "jobs/inputs/shard.h"
#include "jobs/spec/spec_model.h"
#include "jobs/spec/spec_parser.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/run/model_args.h"
#include "runner/slurm/array_manifest.h"
#include "runner/slurm/sbatch_script.h"

namespace nj::runner {
namespace {

struct SlurmArgs {
  std::string spec;
  int tasks = 0;
  std::string out;
  bool submit = false;
  std::string partition;
  std::string time;
  std::string memory;
  int cpus = 0;
  bool requeue = false;
  std::string output = "text";
  std::vector<std::string> extra;  // after --
};

std::string absolute(const std::string& path) {
  std::error_code ec;
  std::string s = std::filesystem::absolute(path, ec).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return ec ? path : s;
}

// This program's own path, which the tasks run.
Result<std::string> self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return io_error("cannot read /proc/self/exe to name the nightjar program");
  return std::string(buf, static_cast<size_t>(n));
}

// The options the flags give, or a usage error named by its flag.
Result<SbatchOptions> sbatch_options(const SlurmArgs& a, std::string& bad_flag) {
  SbatchOptions o;
  o.tasks = a.tasks;
  if (!a.partition.empty()) o.partition = a.partition;
  if (!a.time.empty()) {
    bad_flag = "--time";
    NJ_ASSIGN_OR_RETURN(int64_t s, parse_time_limit(a.time));
    o.time_limit_s = s;
  }
  if (!a.memory.empty()) {
    bad_flag = "--memory";
    NJ_ASSIGN_OR_RETURN(uint64_t bytes, parse_size_flag(a.memory));
    if (bytes == 0) return invalid_argument("the memory request must be positive");
    o.memory_bytes = bytes;
  }
  if (a.cpus > 0) o.cpus = a.cpus;
  o.requeue = a.requeue;
  for (const std::string& e : a.extra) {
    bad_flag = "sbatch options";
    if (e.empty() || e[0] != '-' || e.find('\n') != std::string::npos)
      return invalid_argument("'" + e + "' is not an sbatch option (they go after --)");
  }
  o.extra = a.extra;
  bad_flag.clear();
  return o;
}

// The manifest of the validated spec.
ArrayManifest make_manifest(const jobs::JobSpec& spec, const std::string& spec_path, int tasks) {
  ArrayManifest m;
  m.spec = spec_path;
  m.name = spec.name;
  m.kind = jobs::job_kind_name(spec.kind);
  m.model_dir = spec.model_dir;
  m.settings = jobs::job_settings_to_json(spec);
  m.tasks = tasks;
  for (const auto& item : spec.items) m.items.push_back({item.id, jobs::shard_of(item.id, tasks)});
  return m;
}

// An array directory holds one array: the same manifest may be written again (new sbatch
// options), another is refused.
Status check_same_array(const std::string& dir, const ArrayManifest& m) {
  auto old = read_array_manifest(dir);
  if (!old.ok()) return old.status().code() == StatusCode::kNotFound ? Status() : old.status();
  bool same = old->tasks == m.tasks && old->name == m.name && old->spec == m.spec &&
              old->items.size() == m.items.size();
  for (size_t k = 0; same && k < m.items.size(); ++k)
    same = old->items[k].custom_id == m.items[k].custom_id;
  if (same) return Status();
  return failed_precondition(array_manifest_path(dir) + " describes another array (" + old->name +
                             ", " + std::to_string(old->tasks) + " tasks, " +
                             std::to_string(old->items.size()) +
                             " items): give this one its own --out directory");
}

Status make_dirs(const std::string& dir) {
  for (const char* sub : {"", "/homes", "/results", "/logs"}) {
    std::error_code ec;
    std::filesystem::create_directories(dir + sub, ec);
    if (ec) return io_error(dir + sub + ": cannot create the directory: " + ec.message());
  }
  return Status();
}

}  // namespace

void add_slurm_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<SlurmArgs>();
  CLI::App* sub = app.add_subcommand(
      "slurm", "Write (and with --submit, submit) a Slurm array job: one task per shard");
  sub->add_option("spec", a->spec, "Job spec (YAML)")->required();
  sub->add_option("extra", a->extra, "After --: more sbatch options, written as #SBATCH lines");
  sub->add_option("--tasks", a->tasks, "Array tasks (shards of the items)")
      ->required()
      ->check(CLI::Range(1, jobs::kMaxShards));
  sub->add_option("--out", a->out, "The array directory (script, homes, results, logs)")
      ->required();
  sub->add_flag("--submit", a->submit, "Run sbatch on the script and print the Slurm job id");
  sub->add_option("--partition", a->partition, "sbatch --partition");
  sub->add_option("--time", a->time,
                  "sbatch --time HH:MM:SS: the night's length; each task stops gracefully "
                  "(checkpointed) shortly before it");
  sub->add_option("--memory", a->memory, "sbatch --mem, e.g. 16GiB (per task)");
  sub->add_option("--cpus", a->cpus, "sbatch --cpus-per-task, and run --threads")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--requeue", a->requeue,
                "sbatch --requeue: a preempted task is requeued and resumes from its checkpoints");
  sub->add_option("--output", a->output,
                  "text, or json: the script, the array and the Slurm job id as one object")
      ->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    std::string bad_flag;
    auto options = sbatch_options(*a, bad_flag);
    if (!options.ok()) return report_usage_error(bad_flag, options.status());
    const std::string dir = absolute(a->out), spec_path = absolute(a->spec);
    if (Status s = check_script_path("--out", dir); !s.ok()) return report_usage_error("--out", s);
    if (Status s = check_script_path("SPEC", spec_path); !s.ok())
      return report_usage_error("SPEC", s);
    auto self = self_path();
    if (!self.ok()) return report_failure(self.status());
    if (Status s = check_script_path("the nightjar program", *self); !s.ok())
      return report_failure(s);

    // The same checks as `submit`, on the path the tasks will give it.
    auto spec = jobs::load_job_spec(spec_path);
    if (!spec.ok()) return report_failure(spec.status());
    if (Status s = jobs::bind_spec_to_model(*spec); !s.ok()) return report_failure(s);
    if (options->memory_bytes && spec->memory_bytes && *spec->memory_bytes > *options->memory_bytes)
      return report_usage_error(
          "--memory",
          invalid_argument("the spec's engine budget (" + format_bytes(*spec->memory_bytes) +
                           ") exceeds " + a->memory + ": Slurm would kill the task"));

    const ArrayManifest manifest = make_manifest(*spec, spec_path, a->tasks);
    if (Status s = check_same_array(dir, manifest); !s.ok()) return report_failure(s);
    if (Status s = make_dirs(dir); !s.ok()) return report_failure(s);
    if (Status s = write_array_manifest(dir, manifest); !s.ok()) return report_failure(s);
    options->nightjar = *self;
    options->spec = spec_path;
    options->dir = dir;
    options->job_name = "nightjar-" + spec->name;
    for (char& c : options->job_name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    const std::string script = dir + "/job.sbatch";
    if (Status s = write_file_durably(*Env::posix(), script, sbatch_script(*options)); !s.ok())
      return report_failure(s);
    std::vector<int> per_task(a->tasks, 0);
    for (const ArrayItem& item : manifest.items) ++per_task[item.task];
    const auto [lo, hi] = std::minmax_element(per_task.begin(), per_task.end());
    spdlog::info("wrote {}: {} items of '{}' in {} tasks ({}..{} items each)", script,
                 manifest.items.size(), spec->name, a->tasks, *lo, *hi);
    const auto summary = [&](const std::optional<std::string>& slurm_id) {
      print_json({{"script", script},
                  {"array", dir},
                  {"name", spec->name},
                  {"tasks", a->tasks},
                  {"items", manifest.items.size()},
                  {"submitted", slurm_id.has_value()},
                  {"slurm_job_id", slurm_id ? nlohmann::json(*slurm_id) : nlohmann::json()}});
    };
    if (!a->submit) {
      if (a->output == "json") {
        summary(std::nullopt);
      } else {
        std::printf("%s\n", script.c_str());
        std::fflush(stdout);
      }
      return kExitOk;
    }
    auto id = call_sbatch(script);
    if (!id.ok()) return report_failure(id.status());
    if (a->output == "json") {
      summary(*id);
    } else {
      std::printf("%s\n", id->c_str());
      std::fflush(stdout);
    }
    spdlog::info("submitted Slurm array job {} ({} tasks); then: nightjar merge {}", *id, a->tasks,
                 dir);
    return kExitOk;
  });
}

}  // namespace nj::runner
