// `nightjar submit SPEC.yaml [--home DIR] [--output json]`: validate a job spec against its
// model and store the job and its items in one transaction (a rejected spec writes nothing).
// `nightjar submit --openai-batch FILE.jsonl --model DIR [--name N] [--memory SIZE]
// [--max-tokens N] [--output-file OUT.jsonl [--error-file ERR.jsonl]]`: the same for an OpenAI
// Batch API input file (jobs/openai_batch.h), as one generate job whose Batch API output
// (and error) file is written when it ends.
// `--shard I/N` queues only the items of shard I of N (jobs/shard.h), at most once per home
// (JobStore::submit_shard): what each task of a `nightjar slurm` array runs first.
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "engine/util/units.h"
#include "jobs/inputs/shard.h"
#include "jobs/openai/openai_batch.h"
#include "jobs/spec/output_paths.h"
#include "jobs/spec/spec_model.h"
#include "jobs/spec/spec_parser.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/run/model_args.h"
#include "runner/store/home.h"
#include "runner/store/job_label.h"

namespace nj::runner {
namespace {

NewJob to_new_job(const jobs::JobSpec& spec, const std::string& spec_path) {
  NewJob job;
  job.name = spec.name;
  job.kind = jobs::job_kind_name(spec.kind);
  job.model_dir = spec.model_dir;
  job.memory_bytes = spec.memory_bytes;
  job.max_attempts = spec.max_attempts;
  job.priority = spec.priority;
  job.spec_path = spec_path;
  job.settings_json = jobs::job_settings_to_json(spec).dump();
  for (const auto& item : spec.items) {
    job.items.push_back(NewItem{item.id, item.prompt_text ? item.prompt_text : item.document,
                                item.prompt_ids, jobs::item_params_to_json(spec, item).dump()});
  }
  return job;
}

struct SubmitArgs {
  std::string spec;
  std::string openai_batch;
  std::string model;
  std::string name;
  std::string memory;
  std::string home;
  std::string shard;
  std::vector<std::string> allow_outputs;
  std::string output = "text";
  std::string output_file, error_file;  // --openai-batch: the Batch API's result files
  int max_tokens = 0;                   // --openai-batch: the job's default (0: 4096)
};

// A usage error of the flag combination (exit 2), named by its flag; nullopt when fine.
std::optional<std::pair<std::string, Status>> usage_error(const SubmitArgs& a) {
  if (!a.shard.empty())
    if (auto shard = jobs::parse_shard(a.shard); !shard.ok()) return {{"--shard", shard.status()}};
  if (a.openai_batch.empty()) {
    if (a.spec.empty())
      return {{"SPEC", invalid_argument("give a job spec, or --openai-batch FILE --model DIR")}};
    // Each names what the spec says instead, which the flag would silently lose to.
    const std::pair<bool, std::pair<const char*, const char*>> openai_only[] = {
        {!a.model.empty(), {"--model", "the spec names its model"}},
        {!a.name.empty(), {"--name", "the spec names the job"}},
        {!a.memory.empty(), {"--memory", "the spec's memory: is the job's budget"}},
        {!a.output_file.empty(), {"--output-file", "a spec declares outputs:"}},
        {!a.error_file.empty(), {"--error-file", "a spec declares outputs:"}},
        {a.max_tokens > 0, {"--max-tokens", "a spec gives max_tokens per item or in defaults:"}},
    };
    for (const auto& [given, flag] : openai_only)
      if (given)
        return {{flag.first, invalid_argument(std::string("goes with --openai-batch, not with a "
                                                          "job spec (") +
                                              flag.second + ")")}};
    return std::nullopt;
  }
  if (!a.error_file.empty() && a.output_file.empty())
    return {{"--error-file", invalid_argument("goes with --output-file")}};
  if (!a.allow_outputs.empty())
    return {{"--allow-outputs",
             invalid_argument("does not go with --openai-batch (it goes with a spec that "
                              "declares outputs; --output-file and --error-file are checked "
                              "as they are)")}};
  if (!a.spec.empty())
    return {{"--openai-batch", invalid_argument("give a spec or --openai-batch, not both")}};
  if (a.model.empty()) return {{"--openai-batch", invalid_argument("needs --model DIR")}};
  if (!a.memory.empty())
    if (auto bytes = parse_size_flag(a.memory); !bytes.ok()) return {{"--memory", bytes.status()}};
  return std::nullopt;
}

// The validated job the arguments describe: a spec file (its outputs checked against the
// output-path policy for `home`), or an OpenAI batch file.
// REQUIRES: !usage_error(a).
Result<jobs::JobSpec> load_job(const SubmitArgs& a, const Home& home) {
  if (a.openai_batch.empty()) {
    NJ_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::load_job_spec(a.spec));
    NJ_RETURN_IF_ERROR(jobs::bind_spec_to_model(spec));
    NJ_RETURN_IF_ERROR(
        jobs::check_declared_outputs(spec, a.allow_outputs, {home.dir}, Home::kStoreFile));
    return spec;
  }
  jobs::OpenAiBatchJob job{a.openai_batch, a.model, a.name, std::nullopt};
  if (!a.memory.empty()) job.memory_bytes = *parse_size_flag(a.memory);
  if (a.max_tokens > 0) job.default_max_tokens = a.max_tokens;
  NJ_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::load_openai_batch(job));
  if (!a.output_file.empty()) {
    std::optional<std::string> error_file;
    if (!a.error_file.empty()) error_file = a.error_file;
    NJ_RETURN_IF_ERROR(
        jobs::check_openai_outputs(spec, a.output_file, error_file, {home.dir}, Home::kStoreFile));
  }
  return spec;
}

// Keeps the items of `shard` (validation has seen them all).
void keep_shard(jobs::JobSpec& spec, const jobs::Shard& shard) {
  std::erase_if(spec.items, [&](const jobs::ItemSpec& item) {
    return jobs::shard_of(item.id, shard.count) != shard.index;
  });
}

}  // namespace

void add_submit_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* sub = app.add_subcommand("submit", "Validate a job spec and queue its items");
  sub->add_option("spec", a->spec, "Job spec (YAML)");
  sub->add_option("--openai-batch", a->openai_batch,
                  "Instead of a spec: an OpenAI Batch API input file (JSON Lines of chat "
                  "completion requests), queued as one generate job");
  sub->add_option("--model", a->model, "With --openai-batch: the model directory");
  sub->add_option("--name", a->name, "With --openai-batch: the job name (default: the file's)");
  sub->add_option("--memory", a->memory, "With --openai-batch: the engine memory budget");
  sub->add_option("--output-file", a->output_file,
                  "With --openai-batch: write the Batch API output file here when the job ends "
                  "(atomically; again with `results JOB --write`)");
  sub->add_option("--error-file", a->error_file,
                  "With --output-file: the lines of requests that failed or were cancelled go "
                  "here instead (OpenAI's error file)");
  sub->add_option("--max-tokens", a->max_tokens,
                  "With --openai-batch: the output limit of requests without max_tokens (default "
                  "4096, never past the model's context)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--allow-outputs", a->allow_outputs,
                  "A directory outside the spec's own where its outputs may be written "
                  "(repeatable; never inside a home)");
  add_home_option(*sub, a->home);
  sub->add_option("--shard", a->shard,
                  "I/N: queue only shard I of N of the items (by custom_id hash), once: "
                  "a second submit of the same shard to the same home queues nothing");
  sub->add_option("--output", a->output, "text (the job id) or json")
      ->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto home = resolve_home(a->home);
    if (!home.ok()) return report_usage_error("--home", home.status());
    if (auto bad = usage_error(*a)) return report_usage_error(bad->first, bad->second);
    auto spec = load_job(*a, *home);
    if (!spec.ok()) return report_failure(spec.status());
    const std::string& source = a->spec.empty() ? a->openai_batch : a->spec;
    std::error_code ec;
    const std::string spec_path = std::filesystem::absolute(source, ec).lexically_normal().string();
    std::optional<jobs::Shard> shard;
    if (!a->shard.empty()) {
      shard = *jobs::parse_shard(a->shard);
      keep_shard(*spec, *shard);
      // A task holds only its shard's items: the job's declared outputs come from `merge`.
      if (spec->classify && (spec->classify->output_jsonl || spec->classify->output_csv)) {
        spdlog::info(
            "shard {}: the spec's outputs are not written by a shard (`nightjar merge` "
            "writes the whole job's results)",
            shard->to_string());
        spec->classify->output_jsonl.reset();
        spec->classify->output_csv.reset();
      }
    }
    StoreOptions options;
    // A shard's home is an array task's, on a filesystem shared between hosts (sqlite.h).
    if (shard) options.journal = sql::Journal::kRollback;
    auto store = open_home_store(*home, /*create=*/true, options);
    if (!store.ok()) return report_failure(store.status());
    const NewJob job = to_new_job(*spec, spec_path.empty() ? source : spec_path);
    ShardSubmit queued;
    if (shard) {
      auto s = (*store)->submit_shard(job, shard->to_string());
      if (!s.ok()) return report_failure(s.status().with_context(source));
      queued = *s;
    } else {
      auto id = (*store)->submit(job);
      if (!id.ok()) return report_failure(id.status().with_context(source));
      queued = {*id, true};
    }
    const int64_t id = queued.job_id;
    if (a->output == "json") {
      print_json({{"job_id", id},
                  {"name", spec->name},
                  {"kind", jobs::job_kind_name(spec->kind)},
                  {"items", spec->items.size()},
                  {"home", home->dir},
                  {"shard", shard ? nlohmann::json(shard->to_string()) : nullptr},
                  {"already_queued", !queued.created}});
    } else {
      std::printf("%lld\n", static_cast<long long>(id));
      std::fflush(stdout);
      if (!queued.created)
        spdlog::info("{} (shard {}) was already queued in {}: nothing submitted",
                     job_label(id, spec->name), shard->to_string(), home->dir);
      else
        spdlog::info("queued {}: {}{} (home {})", job_label(id, spec->name),
                     spec->items.size() == 1 ? "1 item" : std::to_string(spec->items.size()) + " items",
                     shard ? " of shard " + shard->to_string() : "", home->dir);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
