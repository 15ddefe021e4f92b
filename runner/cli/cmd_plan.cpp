// `nightjar plan --model DIR --memory SIZE [--bandwidth GBps] [--output json]`: the residency
// plan for a budget, without reading any weights (headers only).
// `nightjar plan SPEC.yaml [--bandwidth GBps] [--until HH:MM] [--batch N] [--output json]`:
// a job's night predicted (plan_job.h); the same for `plan JOB` (a job in the home's store:
// the work it has left) and `plan --openai-batch FILE --model DIR [--memory SIZE]`.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <CLI/CLI.hpp>

#include <spdlog/spdlog.h>
#include "engine/model/config.h"
#include "engine/model/layout.h"
#include "engine/model/tensor_index.h"

#include "engine/io/env.h"
#include "engine/io/file.h"
#include "engine/plan/planner.h"
#include "engine/runtime/model.h"
#include "engine/util/units.h"
#include "engine/weights/pack.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/forecast/plan_job.h"
#include "runner/run/model_args.h"
#include "runner/store/home.h"

namespace nj::runner {
namespace {

// What `plan` predicts a whole job from: a spec file, an OpenAI batch file or a job in the
// home's store.
struct JobSource {
  std::optional<jobs::OpenAiBatchJob> openai_batch;
  std::string home;  // a stored job's home flag (PlanJobArgs::spec names the job)
  bool stored = false;
};

// `plan SPEC.yaml` / `plan --openai-batch FILE` / `plan JOB`: parses --until, predicts,
// prints; returns the exit code.
int run_plan_job(const PlanJobArgs& a, const JobSource& source = {}) {
  std::optional<std::time_t> deadline;
  const std::time_t now = std::time(nullptr);
  if (!a.until.empty()) {
    auto t = parse_clock_time(a.until);
    if (!t.ok()) return report_usage_error("--until", t.status());
    deadline = next_occurrence(*t, now);
  }
  std::optional<Home> home;
  if (source.stored) {
    auto h = resolve_home(source.home);
    if (!h.ok()) return report_usage_error("--home", h.status());
    home = *h;
  }
  auto predict_it = [&]() -> Result<JobPlanReport> {
    if (source.openai_batch) return plan_openai_batch(a, *source.openai_batch, now, deadline);
    if (!source.stored) return plan_job(a, now, deadline);
    // Not a file: a job id or name in the home's store.
    auto store = open_home_store(*home, /*create=*/false);
    if (!store.ok())
      return store.status().with_context(a.spec + ": no such file, so read as a job");
    auto job = (*store)->find_job(a.spec);
    if (!job.ok()) return job.status().with_context(a.spec + ": no such file, so read as a job");
    NJ_ASSIGN_OR_RETURN(auto items, (*store)->items(job->id));
    return plan_stored_job(a, *job, items, now, deadline);
  };
  auto report = predict_it();
  if (!report.ok()) return report_failure(report.status());
  if (a.json)
    print_json(plan_job_json(a, *report));
  else
    std::fputs(plan_job_text(a, *report).c_str(), stdout);
  return kExitOk;
}

// The flags of `plan` (defaults as --help states them).
struct PlanArgs {
  std::string model, memory, output = "text";
  double bandwidth = 2.6, measure_disk = 0, decode_gbps = PlanOptions{}.decode_gbps;
  int prefill_chunk = kDefaultPrefillChunk, max_context = 4096, batch = 1,
      io_threads = kDefaultIoThreads, threads = 0;
  bool all_logits = false, no_pack = false;
  std::string routing_profile, pack_dir, pin_compressed = "auto";
  std::string spec, until, schedule = "auto";
  std::string openai_batch, home;
};

// `plan SPEC.yaml`, `plan JOB` and `plan --openai-batch FILE --model DIR [--memory SIZE]`:
// the flags that apply to a whole job, then the prediction.
int run_plan_spec(const PlanArgs& a, const CLI::App& sub) {
  JobSource source;
  std::error_code ec;
  if (!a.openai_batch.empty()) {
    if (!a.spec.empty())
      return report_usage_error("--openai-batch",
                                invalid_argument("give a spec, a job or --openai-batch, not two"));
    if (a.model.empty())
      return report_usage_error("--openai-batch", invalid_argument("needs --model DIR"));
    jobs::OpenAiBatchJob batch{a.openai_batch, a.model, "", std::nullopt};
    if (!a.memory.empty()) {
      auto b = parse_size_flag(a.memory);
      if (!b.ok()) return report_usage_error("--memory", b.status());
      batch.memory_bytes = *b;
    }
    source.openai_batch = batch;
  } else if (!std::filesystem::exists(a.spec, ec)) {
    source.stored = true;  // not a file: a job id or name in the home
    source.home = a.home;
  }
  const char* what = source.openai_batch ? "an OpenAI batch file (its --model and --memory do)"
                     : source.stored     ? "a job in the store (it has its own model and budget)"
                                         : "a job spec";
  // The flags of `plan --model` alone: a job's prediction would silently leave them out.
  for (const char* flag : {"--memory", "--model", "--pack", "--no-pack",
                           "--all-logits", "--max-context", "--decode-gbps", "--pin-compressed"}) {
    if (source.openai_batch && (std::string(flag) == "--memory" || std::string(flag) == "--model"))
      continue;
    if (sub.count(flag) > 0)
      return report_usage_error(flag, invalid_argument(std::string("does not apply to ") + what));
  }
  if (!source.stored && sub.count("--home") > 0)
    return report_usage_error("--home", invalid_argument(std::string("does not apply to ") + what));
  PlanJobArgs job;
  job.spec = a.spec;
  if (sub.count("--measure-disk") > 0 && sub.count("--bandwidth") > 0)
    return report_usage_error("--measure-disk",
                              invalid_argument("give --bandwidth or --measure-disk, not both"));
  job.bandwidth_gbps = a.bandwidth;
  job.measure_disk_seconds = a.measure_disk;
  job.until = a.until;
  job.batch = sub.count("--batch") > 0 ? a.batch : 0;
  job.prefill_chunk = sub.count("--prefill-chunk") > 0 ? a.prefill_chunk : 0;
  job.io_threads = sub.count("--io-threads") > 0 ? a.io_threads : 0;
  job.threads = a.threads;
  auto schedule = parse_schedule(a.schedule);
  if (!schedule.ok()) return report_usage_error("--schedule", schedule.status());
  job.schedule = *schedule;
  job.routing_profile = a.routing_profile;
  job.json = a.output == "json";
  if (source.openai_batch) job.spec = a.openai_batch;
  return run_plan_job(job, source);
}

// `plan --model DIR`: where the weights would live under --memory.
int run_plan_model(const PlanArgs& a, const CLI::App& sub) {
  if (!a.until.empty())
    return report_usage_error("--until", invalid_argument("goes with a job spec"));
  if (a.measure_disk > 0)
    return report_usage_error("--measure-disk", invalid_argument("goes with a job spec"));
  if (a.threads > 0)
    return report_usage_error("--threads", invalid_argument("goes with a job spec"));
  if (sub.count("--schedule") > 0)
    return report_conflict("--schedule", "--model", "it predicts a classify job's schedule: give "
                                                    "the job's spec");
  if (sub.count("--home") > 0)
    return report_conflict("--home", "--model", "a home holds jobs: give a job's id or name");
  uint64_t budget = 0;
  if (!a.memory.empty()) {
    auto b = parse_size_flag(a.memory);
    if (!b.ok()) return report_usage_error("--memory", b.status());
    budget = *b;
  }
  std::string pack_warning;  // a valid packed trunk changes the units' read sizes
  auto headers = open_model_headers(a.model, !a.no_pack, &pack_warning, a.pack_dir);
  if (!headers.ok()) return report_failure(headers.status());
  if (!pack_warning.empty()) spdlog::warn("not using the packed trunk: {}", pack_warning);
  const ModelLayout& layout = *headers->layout;
  PlanOptions po;
  po.bandwidth_gbps = a.bandwidth;
  po.decode_gbps = a.decode_gbps;
  po.io_threads = a.io_threads;
  po.pin_compressed = *parse_pin_compressed(a.pin_compressed);  // checked by the option
  po.prefill_chunk = a.prefill_chunk;
  po.max_context = a.max_context;
  po.all_logits = a.all_logits;
  po.batch = a.batch;
  RoutingProfile routing;
  if (!a.routing_profile.empty()) {
    auto text = read_small_file(a.routing_profile);
    if (!text.ok()) return report_failure(text.status());
    auto parsed = RoutingProfile::parse(*text, a.routing_profile,
                                        model_fingerprint(headers->config, *headers->index));
    if (!parsed.ok()) return report_failure(parsed.status());
    routing = std::move(parsed).value();
    po.routing = &routing;
  }
  auto plan = plan_residency(layout, budget, po);
  if (!plan.ok()) {
    if (plan.status().code() == StatusCode::kResourceExhausted && a.output == "json") {
      // Still say what the minimum is, machine-readably.
      auto min_plan = plan_residency(layout, 0, po);
      if (min_plan.ok()) {
        PlanOptions one = po;
        one.batch = 1;
        auto one_plan = plan_residency(layout, budget, one);
        print_json({{"error", error_json(exit_code_for(plan.status()), plan.status().message())},
                    {"batch", po.batch},
                    {"min_memory_bytes", min_plan->min_memory_bytes},
                    {"max_batch", one_plan.ok() ? one_plan->max_batch : 0}});
      }
    }
    return report_failure(plan.status());
  }
  if (a.output == "json")
    print_json(plan->to_json());
  else
    std::fputs(plan->to_text().c_str(), stdout);
  return kExitOk;
}

// The flags of `plan`; returns the subcommand.
CLI::App* add_plan_options(CLI::App& app, PlanArgs* a) {
  CLI::App* sub =
      app.add_subcommand("plan",
                         "Show where the weights would live under a memory budget, and the "
                         "predicted reads and seconds per decoded token");
  sub->add_option("spec", a->spec,
                  "A job spec (YAML), or a queued or running job's id or name in the home: "
                  "predict the whole job (a stored job: the work it has left) as `run` would do "
                  "it (its model and budget come from the spec or the store; --model and "
                  "--memory do not apply)");
  sub->add_option("--openai-batch", a->openai_batch,
                  "Instead of a spec: an OpenAI Batch API input file, predicted as the job "
                  "`submit --openai-batch` would queue (with --model, and --memory)");
  add_home_option(*sub, a->home);
  sub->add_option("--model", a->model, "Model directory");
  sub->add_option("--until", a->until,
                  "With a spec: say whether the job ends before this local time, e.g. 07:00");
  sub->add_option("--memory", a->memory, "Memory budget, e.g. 8GiB (omit: everything resident)");
  sub->add_option("--bandwidth", a->bandwidth,
                  "Disk read bandwidth in GB/s for the prediction (default 2.6; "
                  "`nightjar doctor` measures it)")
      ->check(CLI::PositiveNumber);
  sub->add_option(
         "--measure-disk", a->measure_disk,
         "With a spec: instead of --bandwidth, read the model's own weight files as a run does "
         "(O_DIRECT, its I/O threads, over and over) for this many seconds and predict at the "
         "rate of the second half")
      ->check(CLI::PositiveNumber);
  sub->add_option("--threads", a->threads,
                  "With a spec: compute threads for the kernel probe, as run's --threads "
                  "(default: calibrated as run calibrates them)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--prefill-chunk", a->prefill_chunk, "As for generate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-context", a->max_context, "Positions of state to reserve (default 4096)")
      ->check(CLI::PositiveNumber);
  sub->add_option(
         "--batch", a->batch,
         "Sequences decoding together: the budget holds their states and the activations of their "
         "passes; predictions are per step of the batch and per token")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_flag("--all-logits", a->all_logits, "Plan for `logits` (keeps every position's logits)");
  sub->add_option("--schedule", a->schedule,
                  "With a job spec: predict run --schedule sweep, passes or auto (default)")
      ->capture_default_str();
  sub->add_option(
      "--routing-profile", a->routing_profile,
      "Predict the expert cache and, for a job, the experts each pass or sweep reads from this "
      "measured routing (generate --save-routing-profile) instead of uniform routing");
  sub->add_option("--decode-gbps", a->decode_gbps,
                  "Lossless pack: decode rate of one I/O thread in GB/s for the prediction and the "
                  "choice of units held compressed (default 8)")
      ->check(CLI::PositiveNumber);
  add_pin_compressed_option(*sub, a->pin_compressed);
  sub->add_option("--io-threads", a->io_threads,
                  "As for generate (default 8): one block staging buffer each")
      ->check(CLI::PositiveNumber);
  sub->add_option("--pack", a->pack_dir,
                  "Directory of a packed trunk (default: the model directory)");
  sub->add_flag("--no-pack", a->no_pack, "Plan for the shards even if a valid pack exists");
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  return sub;
}

}  // namespace

void add_plan_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* sub = add_plan_options(app, a.get());
  table.emplace_back(sub, [a, sub]() -> int {
    if (!a->openai_batch.empty()) return run_plan_spec(*a, *sub);
    if (!a->spec.empty() && !a->model.empty())
      return report_conflict("--model", "a job spec or job (" + a->spec + ")",
                             "the job names its model");
    if (a->spec.empty() && a->model.empty())
      return report_usage_error(
          "--model",
          invalid_argument("give a job spec, a job, --openai-batch FILE or --model DIR"));
    if (!a->spec.empty()) return run_plan_spec(*a, *sub);
    return run_plan_model(*a, *sub);
  });
}

}  // namespace nj::runner
