// `nightjar merge DIR [--format jsonl|csv|openai] [--out FILE] [--partial] [--output json]`:
// the results of a Slurm array's tasks merged by custom_id (array_merge.h), every item of the
// job exactly once, in spec order, in the forms of `nightjar results`. What is missing or not
// done is listed per task on stderr; then the exit status is 1 and nothing is written unless
// --partial asks for the records there are. With --output json (which needs --out: stdout
// carries the summary) stdout holds one object saying what was merged and what is missing.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "engine/tokenizer/tokenizer.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/results/job_outputs.h"
#include "runner/results/openai_results.h"
#include "runner/results/result_record.h"
#include "runner/slurm/array_manifest.h"
#include "runner/slurm/array_merge.h"

namespace nj::runner {
namespace {

// The merged records in `format`.
Result<std::string> merged_text(const ArrayManifest& manifest, const ArrayMerge& merge,
                                const std::string& format) {
  std::string text;
  if (format == "csv") return records_csv(manifest.kind, manifest.settings.dump(), merge.records);
  std::optional<Tokenizer> tok;
  if (format == "openai" && Tokenizer::exists_in(manifest.model_dir)) {
    if (auto t = Tokenizer::load(manifest.model_dir); t.ok()) tok.emplace(std::move(*t));
  }
  const std::string model = std::filesystem::path(manifest.model_dir).filename().string();
  for (size_t k = 0; k < merge.records.size(); ++k) {
    const nlohmann::json line =
        format == "openai"
            ? openai_batch_line(merge.records[k], "array_" + std::to_string(merge.record_index[k]),
                                model, tok ? &*tok : nullptr)
            : merge.records[k];
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return text;
}

// `merge --output json`: {"array", "name", "tasks", "items", "done", "complete", "written",
// "out", "duplicates", "gaps": [{"task", "no_file", "missing", "not_done": [{"custom_id",
// "status", "error"}]}]}; "written" is 0 and "out" null when nothing was written.
nlohmann::json merge_json(const std::string& dir, const ArrayManifest& manifest,
                          const ArrayMerge& merge, const std::string& out, bool written) {
  nlohmann::json gaps = nlohmann::json::array();
  for (const TaskGap& gap : merge.gaps) {
    nlohmann::json not_done = nlohmann::json::array();
    for (const nlohmann::json& r : gap.not_done) {
      const std::string error = record_error(r);
      not_done.push_back({{"custom_id", r["custom_id"]},
                          {"status", r["status"]},
                          {"error", error.empty() ? nlohmann::json() : nlohmann::json(error)}});
    }
    gaps.push_back({{"task", gap.task},
                    {"no_file", gap.no_file},
                    {"missing", gap.missing},
                    {"not_done", not_done}});
  }
  return {{"array", dir},
          {"name", manifest.name},
          {"tasks", manifest.tasks},
          {"items", merge.items},
          {"done", merge.done},
          {"complete", merge.complete()},
          {"written", written ? merge.records.size() : 0},
          {"out", written ? nlohmann::json(out) : nlohmann::json()},
          {"duplicates", merge.duplicates},
          {"gaps", gaps}};
}

}  // namespace

void add_merge_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string dir;
    std::string format = "jsonl";
    std::string out;
    bool partial = false;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "merge", "Merge a Slurm array's task results by custom_id: every item exactly once");
  sub->add_option("dir", a->dir, "The array directory (nightjar slurm --out)")->required();
  sub->add_option("--format", a->format, "jsonl (default), csv, or openai (as `results`)")
      ->check(CLI::IsMember({"jsonl", "csv", "openai"}));
  sub->add_option("--out", a->out, "Write to this file (atomically) instead of stdout");
  sub->add_flag("--partial", a->partial,
                "Write the records there are even when items are missing or not done "
                "(the exit status is still 1)");
  sub->add_option("--output", a->output,
                  "text, or json: what was merged and what is missing, as one object on stdout "
                  "(needs --out)")
      ->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    const bool json = a->output == "json";
    if (json && a->out.empty())
      return report_usage_error(
          "--output json", invalid_argument("needs --out FILE: without it the merged records "
                                            "go to stdout, where the JSON summary goes"));
    auto manifest = read_array_manifest(a->dir);
    if (!manifest.ok()) return report_failure(manifest.status());
    auto tasks = read_task_results(a->dir, *manifest);
    if (!tasks.ok()) return report_failure(tasks.status());
    auto merge = merge_task_results(*manifest, *tasks);
    if (!merge.ok()) return report_failure(merge.status());
    for (const std::string& d : merge->duplicates)
      spdlog::warn("duplicate result, kept once: {}", d);
    if (!merge->complete()) {
      spdlog::error("{}: the array is incomplete: {} of {} items done", a->dir,
                    merge->done, merge->items);
      std::fputs(describe_gaps(*merge, 20).c_str(), stderr);
      std::fflush(stderr);
      if (!a->partial) {
        if (json) print_json(merge_json(a->dir, *manifest, *merge, a->out, false));
        return kExitFailure;
      }
    }
    auto text = merged_text(*manifest, *merge, a->format);
    if (!text.ok()) return report_failure(text.status());
    if (a->out.empty()) {
      std::fwrite(text->data(), 1, text->size(), stdout);
      std::fflush(stdout);
    } else if (Status s = write_file_durably(*Env::posix(), a->out, *text); !s.ok()) {
      return report_failure(s);
    } else {
      spdlog::info("wrote {} merged results of '{}' ({} tasks) to {}", merge->records.size(),
                   manifest->name, manifest->tasks, a->out);
    }
    if (json) print_json(merge_json(a->dir, *manifest, *merge, a->out, true));
    return merge->complete() ? kExitOk : kExitFailure;
  });
}

}  // namespace nj::runner
