// `nightjar results JOB [--format jsonl|csv|openai] [--out FILE] [--write] [--output json]`:
// one JSON object per item (or a CSV row, job_outputs.h; or a Batch API output line,
// openai_results.h), in spec order, to stdout or (atomically) to a file; --write (re)writes
// the outputs the job's spec declares. With --out or --write, --output json says what was
// written: {"job": {"id", "name"}, "written": [PATH...], "records": N}.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "jobs/spec/job_spec.h"
#include "jobs/spec/output_paths.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/results/job_outputs.h"
#include "runner/results/openai_results.h"
#include "runner/results/result_record.h"
#include "runner/store/home.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_label.h"
#include "runner/store/job_settings.h"

namespace nj::runner {
namespace {

// `results --output json` with --out or --write.
void print_written(const JobRow& job, const std::vector<std::string>& paths, size_t records) {
  print_json({{"job", {{"id", job.id}, {"name", job.name}}},
              {"written", paths},
              {"records", records}});
}

// `results JOB --write`: the job's declared outputs, and how that went recorded with the job.
int write_outputs_now(JobStore& store, const JobRow& job, const Home& home, bool json) {
  auto written = write_declared_outputs(store, job, home);
  if (!written.ok()) {
    if (Status s = store.record_outputs(job.id, {}, written.status().message()); !s.ok())
      spdlog::warn("{}: could not record the failure with the job: {}", job_label(job),
                   s.message());
    return report_failure(written.status());
  }
  if (written->empty())
    return report_failure(
        invalid_argument(job_label(job) +
                         " declares no outputs (outputs: in its spec, or submit --output-file)"));
  if (Status s = store.record_outputs(job.id, *written, std::nullopt); !s.ok())
    return report_failure(s);
  for (const auto& path : *written) spdlog::info("wrote {}", path);
  if (json) {
    auto items = store.items(job.id);
    if (!items.ok()) return report_failure(items.status());
    print_written(job, *written, items->size());
  }
  return kExitOk;
}

}  // namespace

void add_results_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string job;
    std::string home;
    std::string format = "jsonl";
    std::string out;
    bool write = false;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "results",
      "A job's results, one record per item: JSON Lines (default), CSV or OpenAI Batch output");
  sub->add_option("job", a->job, "A job id or name")->required();
  add_home_option(*sub, a->home);
  sub->add_option(
         "--format", a->format,
         "jsonl (default), csv, or openai (Batch API output lines, runner/results/openai_results.h)")
      ->check(CLI::IsMember({"jsonl", "csv", "openai"}));
  sub->add_option("--out", a->out, "Write to this file (atomically) instead of stdout");
  sub->add_flag("--write", a->write,
                "Write the outputs the job declares (outputs: in its spec, or submit "
                "--output-file), to their own paths and formats");
  sub->add_option("--output", a->output,
                  "text, or json (with --out or --write): what was written, as one object")
      ->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a, sub]() -> int {
    const bool json = a->output == "json";
    if (json && a->out.empty() && !a->write)
      return report_usage_error(
          "--output json", invalid_argument("needs --out FILE or --write: without them the "
                                            "records go to stdout, where the JSON summary goes"));
    // --write writes the declared files in their declared formats: an --out or --format
    // beside it would be silently ignored, so the pair is refused.
    for (const char* flag : {"--out", "--format"})
      if (a->write && sub->count(flag) > 0)
        return report_conflict(flag, "--write",
                               "which writes the outputs the job declares, to their paths and in "
                               "their formats");
    auto home = resolve_home(a->home);
    if (!home.ok()) return report_usage_error("--home", home.status());
    auto store = open_home_store(*home, /*create=*/false);
    if (!store.ok()) return report_failure(store.status());
    JobStore& s = **store;
    auto job = s.find_job(a->job);
    if (!job.ok()) return report_failure(job.status());
    if (a->write) return write_outputs_now(s, *job, *home, json);
    if (job->outputs_state == "failed")
      spdlog::warn(
          "{}: its declared outputs could not be written ({}); "
          "`nightjar results {} --write` writes them again",
          job_label(*job), printable(job->outputs_error.value_or("")), job->id);
    if (!a->out.empty()) {
      if (auto inside = jobs::home_containing(a->out, {home->dir}, Home::kStoreFile))
        return report_failure(invalid_argument(
            "--out " + a->out + ": resolves to " + jobs::resolve_path(a->out) +
            ", inside the home " + *inside + " (a job store's directory); write it elsewhere"));
    }
    auto items = s.items(job->id);
    if (!items.ok()) return report_failure(items.status());
    auto text = a->format == "csv"      ? results_csv(s, *job)
                : a->format == "openai" ? openai_batch_text(s, *job, *items)
                                        : results_jsonl(s, *job);
    if (!text.ok()) return report_failure(text.status());
    if (a->out.empty()) {
      std::fwrite(text->data(), 1, text->size(), stdout);
      std::fflush(stdout);
      return kExitOk;
    }
    if (Status st = write_file_durably(*Env::posix(), a->out, *text); !st.ok())
      return report_failure(st);
    spdlog::info("wrote {} results of {} to {}", items->size(), job_label(*job), a->out);
    if (json) print_written(*job, {a->out}, items->size());
    return kExitOk;
  });
}

Result<std::string> results_jsonl(JobStore& store, const JobRow& job) {
  NJ_ASSIGN_OR_RETURN(auto items, store.items(job.id));
  const int64_t shared = shared_prompt_tokens(job);
  std::string text;
  for (const auto& item : items) {
    NJ_ASSIGN_OR_RETURN(auto r, store.result(item.id));
    text += result_record(item, r, shared)
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
            "\n";
  }
  return text;
}

int64_t shared_prompt_tokens(const JobRow& job) {
  if (!is_classify(job)) return 0;
  auto c = JobSettings::of(job).classify();
  return c.ok() ? static_cast<int64_t>(c->prefix_ids.size()) : 0;
}

}  // namespace nj::runner
