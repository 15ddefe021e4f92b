// `nightjar plan SPEC.yaml` (see plan_job.h).
#include "runner/cli/plan_job.h"

#include <cstdio>
#include <ctime>
#include <optional>

#include <spdlog/spdlog.h>

#include "engine/runtime/model.h"
#include "engine/plan/kernel_rates.h"
#include "engine/plan/pass_cost.h"
#include "engine/plan/planner.h"
#include "engine/util/units.h"
#include "jobs/spec_model.h"
#include "jobs/spec_parser.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/model_args.h"
#include "runner/cli/model_read_probe.h"
#include "runner/cli/output.h"
#include "runner/run/job_plan.h"
#include "runner/run/progress.h"
#include "runner/run/scheduler.h"

namespace nj::runner {
namespace {

std::string local_time(std::time_t t) {
  char buf[32];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

// "3.25 s", "1:05:30" or "12.4 h".
std::string hours(double seconds) {
  char buf[32];
  if (seconds >= 60 && seconds < 2 * 3600) return format_duration(seconds);
  if (seconds < 60)
    std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", seconds / 3600);
  return buf;
}

}  // namespace

int plan_job(const PlanJobArgs& a) {
  std::optional<std::time_t> deadline;
  const std::time_t now = std::time(nullptr);
  if (!a.until.empty()) {
    auto t = parse_clock_time(a.until);
    if (!t.ok()) return report_usage_error("--until", t.status());
    deadline = next_occurrence(*t, now);
  }
  auto spec = jobs::load_job_spec(a.spec);
  if (!spec.ok()) return report_failure(spec.status());
  if (Status s = jobs::bind_spec_to_model(*spec); !s.ok()) return report_failure(s);
  auto work = job_work(*spec);
  if (!work.ok()) return report_failure(work.status());

  double bandwidth = a.bandwidth_gbps;
  std::optional<ModelReadProbe> disk;
  if (a.measure_disk_seconds > 0) {
    auto probe = probe_model_reads(spec->model_dir, a.measure_disk_seconds,
                                   a.io_threads > 0 ? a.io_threads : kDefaultIoThreads);
    if (!probe.ok()) return report_failure(probe.status());
    disk = *probe;
    bandwidth = disk->gbps;
  }
  // The kernels run on the threads `run` would use (its --threads, or calibrated as run
  // calibrates them: under a neighbour's load the two calibrations may disagree).
  ModelArgs compute;
  compute.threads = a.threads;
  if (Status s = apply_compute_options(compute); !s.ok()) return report_failure(s);
  KernelRates rates = KernelRates::measure();  // and the model's experts (forecast_job)
  const bool classify = spec->kind == jobs::JobKind::kClassify;
  const uint64_t memory = spec->memory_bytes.value_or(0);
  JobRunShape shape{spec->model_dir, memory,          classify,    jobs::job_max_context(*spec),
                    a.batch,         a.prefill_chunk, a.io_threads};
  if (!classify) shape.speculative = spec->speculative;
  auto forecast = forecast_job(*work, shape, rates, bandwidth);
  if (!forecast.ok()) return report_failure(forecast.status());
  const JobPrediction& p = forecast->prediction;
  const int batch = forecast->batch, max_batch = forecast->max_batch;
  if (a.batch > 0 && batch < a.batch)
    spdlog::warn("--batch {}: the budget {} holds at most {}; run would use {}", a.batch,
                 format_bytes(memory), max_batch, batch);

  int64_t prompt_rows = 0, decode_rows = 0;
  for (const ItemWork& w : work->items) {
    prompt_rows += w.prompt_rows;
    decode_rows += w.decode_rows;
  }
  const std::time_t finish = now + static_cast<std::time_t>(p.seconds + 0.5);
  const double per_item_bytes = p.items ? p.disk_bytes / static_cast<double>(p.items) : 0.0;
  const double per_item_s = p.items ? p.seconds / static_cast<double>(p.items) : 0.0;
  if (a.json) {
    nlohmann::json j = {
        {"job", spec->name},
        {"kind", jobs::job_kind_name(spec->kind)},
        {"model", spec->model_dir},
        {"memory_bytes", memory},
        {"items", p.items},
        {"batch", batch},
        {"max_batch", max_batch},
        {"rows_per_pass", forecast->rows_per_pass},
        {"draft_tokens", forecast->draft_tokens},
        {"passes", p.passes},
        {"rows", p.rows},
        {"prompt_tokens", prompt_rows + work->shared_prefix_rows},
        {"decode_tokens", decode_rows},
        {"predicted_bytes", p.disk_bytes},
        {"predicted_flops", p.flops},
        {"predicted_io_seconds", p.io_seconds},
        {"predicted_compute_seconds", p.compute_seconds},
        {"predicted_element_seconds", p.element_seconds},
        {"predicted_expert_seconds", p.expert_seconds},
        {"predicted_seconds", p.seconds},
        {"predicted_hours", p.seconds / 3600},
        {"predicted_bytes_per_item", per_item_bytes},
        {"predicted_seconds_per_item", per_item_s},
        {"predicted_finish", local_time(finish)},
        {"bandwidth_gbps", bandwidth},
        {"bandwidth_source", disk ? "measured" : "given"},
        {"disk_probe", disk ? nlohmann::json{{"seconds", disk->seconds},
                                             {"bytes", disk->bytes},
                                             {"passes", disk->passes},
                                             {"first_half_gbps", disk->first_gbps},
                                             {"second_half_gbps", disk->gbps}}
                            : nlohmann::json(nullptr)},
        {"kernel_rates", rates.to_json()},
        {"until", a.until.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.until)},
        {"deadline", deadline ? nlohmann::json(local_time(*deadline)) : nlohmann::json(nullptr)},
        {"finishes_by_deadline",
         deadline ? nlohmann::json(finish <= *deadline) : nlohmann::json(nullptr)},
        {"items_by_deadline", deadline
                                  ? nlohmann::json(p.items_within(std::difftime(*deadline, now)))
                                  : nlohmann::json(nullptr)}};
    print_json(j);
    return kExitOk;
  }
  const char* unit = classify ? "document" : "item";
  std::printf("job                 %s (%s, %lld items)\n", spec->name.c_str(),
              jobs::job_kind_name(spec->kind), static_cast<long long>(p.items));
  std::printf("budget              %s, batch %d (%s), %d rows per pass\n",
              memory ? format_bytes(memory).c_str() : "everything resident", batch,
              a.batch > 0 ? "--batch"
              : memory    ? "the largest this budget holds"
                          : "resident default",
              forecast->rows_per_pass);
  std::printf("tokens              %lld prompt, %lld decoded\n",
              static_cast<long long>(prompt_rows + work->shared_prefix_rows),
              static_cast<long long>(decode_rows));
  std::printf("passes              %lld (%lld rows)\n", static_cast<long long>(p.passes),
              static_cast<long long>(p.rows));
  std::printf("reads               %s (%s per %s) at %.2f GB/s: %s\n",
              format_bytes(static_cast<uint64_t>(p.disk_bytes)).c_str(),
              format_bytes(static_cast<uint64_t>(per_item_bytes)).c_str(), unit, bandwidth,
              hours(p.io_seconds).c_str());
  if (disk)
    std::printf(
        "disk                %.2f GB/s reading the model's files for %.0f s (%d passes; "
        "the first half %.2f GB/s)\n",
        disk->gbps, disk->seconds, disk->passes, disk->first_gbps);
  std::printf(
      "compute             %.3g TFLOP at the measured kernel rates: %s (%s outside the products)\n",
      p.flops / 1e12, hours(p.compute_seconds).c_str(), hours(p.element_seconds).c_str());
  std::printf(
      "predicted           %s (%.1f s per %s: expert reads, then trunk reads or compute), done "
      "%s\n",
      hours(p.seconds).c_str(), per_item_s, unit, local_time(finish).c_str());
  if (deadline)
    std::printf("deadline            %s: %s\n", local_time(*deadline).c_str(),
                finish <= *deadline ? "finishes before it" : "does NOT finish before it");
  if (deadline && finish > *deadline)
    std::printf("by the deadline     %lld of %lld %ss\n",
                static_cast<long long>(p.items_within(std::difftime(*deadline, now))),
                static_cast<long long>(p.items), unit);
  return kExitOk;
}

}  // namespace nj::runner
