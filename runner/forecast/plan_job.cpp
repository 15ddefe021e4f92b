// `nightjar plan SPEC.yaml` (see plan_job.h).
#include "runner/forecast/plan_job.h"

#include <cstdio>
#include <ctime>
#include <optional>

#include <spdlog/spdlog.h>

#include "engine/runtime/model.h"
#include "engine/plan/kernel_rates.h"
#include "engine/plan/pass_cost.h"
#include "engine/plan/planner.h"
#include "engine/util/units.h"
#include "jobs/spec/spec_model.h"
#include "jobs/spec/spec_parser.h"
#include "runner/run/model_args.h"
#include "runner/forecast/model_read_probe.h"
#include "runner/store/job_label.h"
#include "runner/forecast/job_plan.h"
#include "runner/item/progress.h"
#include "runner/run/scheduler.h"

namespace nj::runner {
namespace {

// std::printf into a string, of any length.
template <typename... Args>
std::string printf_string(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string out(static_cast<size_t>(n > 0 ? n : 0) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, args...);
  out.resize(out.size() - 1);
  return out;
}

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

namespace {

// Measures what `a` asks for (the disk, the kernels on run's threads) and predicts `r.work`
// under `shape`. REQUIRES: r.spec (name, kind, model, budget) and r.work set.
Result<JobPlanReport> predict(const PlanJobArgs& a, JobPlanReport r, JobRunShape shape) {
  double bandwidth = a.bandwidth_gbps;
  std::optional<ModelReadProbe> disk;
  if (a.measure_disk_seconds > 0) {
    auto probe = probe_model_reads(shape.model_dir, a.measure_disk_seconds,
                                   a.io_threads > 0 ? a.io_threads : kDefaultIoThreads);
    if (!probe.ok()) return probe.status();
    disk = *probe;
    bandwidth = disk->gbps;
  }
  // The kernels run on the threads `run` would use (its --threads, or calibrated as run
  // calibrates them: under a neighbour's load the two calibrations may disagree).
  ModelArgs compute;
  compute.threads = a.threads;
  NJ_RETURN_IF_ERROR(apply_compute_options(compute));
  KernelRates rates = KernelRates::measure();  // and the model's experts (forecast_job)
  shape.batch = a.batch;
  shape.prefill_chunk = a.prefill_chunk;
  shape.io_threads = a.io_threads;
  shape.schedule = a.schedule;
  shape.routing_profile = a.routing_profile;
  NJ_ASSIGN_OR_RETURN(r.forecast, forecast_job(r.work, shape, rates, bandwidth));
  if (a.batch > 0 && r.forecast.batch < a.batch)
    spdlog::warn("--batch {}: the budget {} holds at most {}; run would use {}", a.batch,
                 format_bytes(shape.memory_bytes), r.forecast.max_batch, r.forecast.batch);
  r.bandwidth_gbps = bandwidth;
  r.disk = disk;
  r.rates = rates;
  return r;
}

// A loaded spec (prompts tokenized) planned as run would do it.
Result<JobPlanReport> plan_spec(const PlanJobArgs& a, jobs::JobSpec spec, std::time_t now,
                                std::optional<std::time_t> deadline) {
  JobPlanReport r;
  r.now = now;
  r.deadline = deadline;
  r.spec = std::move(spec);
  NJ_ASSIGN_OR_RETURN(r.work, job_work(r.spec));
  const bool classify = r.spec.kind == jobs::JobKind::kClassify;
  JobRunShape shape{r.spec.model_dir, r.spec.memory_bytes.value_or(0), classify,
                    jobs::job_max_context(r.spec)};
  if (!classify) shape.speculative = r.spec.speculative;
  return predict(a, std::move(r), std::move(shape));
}

}  // namespace

Result<JobPlanReport> plan_job(const PlanJobArgs& a, std::time_t now,
                               std::optional<std::time_t> deadline) {
  NJ_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::load_job_spec(a.spec));
  NJ_RETURN_IF_ERROR(jobs::bind_spec_to_model(spec));
  return plan_spec(a, std::move(spec), now, deadline);
}

Result<JobPlanReport> plan_openai_batch(const PlanJobArgs& a, const jobs::OpenAiBatchJob& batch,
                                        std::time_t now, std::optional<std::time_t> deadline) {
  NJ_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::load_openai_batch(batch));
  return plan_spec(a, std::move(spec), now, deadline);
}

Result<JobPlanReport> plan_stored_job(const PlanJobArgs& a, const JobRow& job,
                                      const std::vector<ItemRow>& items, std::time_t now,
                                      std::optional<std::time_t> deadline) {
  JobPlanReport r;
  r.now = now;
  r.deadline = deadline;
  JobRunShape shape;
  NJ_ASSIGN_OR_RETURN(r.work, remaining_work(job, items, &shape));
  if (r.work.items.empty())
    return failed_precondition(job_label(job) + " has no queued or running items left to plan");
  r.spec.name = job.name;
  r.spec.kind = shape.classify ? jobs::JobKind::kClassify : jobs::JobKind::kGenerate;
  r.spec.model_dir = shape.model_dir;
  if (shape.memory_bytes > 0) r.spec.memory_bytes = shape.memory_bytes;
  return predict(a, std::move(r), std::move(shape));
}

namespace {

// The totals every form of the report shows.
struct PlanTotals {
  int64_t prompt_rows = 0, decode_rows = 0;
  std::time_t finish = 0;
  double per_item_bytes = 0, per_item_s = 0;
};

PlanTotals plan_totals(const JobPlanReport& r) {
  PlanTotals t;
  const JobPrediction& p = r.forecast.prediction;
  for (const ItemWork& w : r.work.items) {
    t.prompt_rows += w.prompt_rows;
    t.decode_rows += w.decode_rows;
  }
  t.finish = r.now + static_cast<std::time_t>(p.seconds + 0.5);
  t.per_item_bytes = p.items ? p.disk_bytes / static_cast<double>(p.items) : 0.0;
  t.per_item_s = p.items ? p.seconds / static_cast<double>(p.items) : 0.0;
  return t;
}

}  // namespace

nlohmann::json plan_job_json(const PlanJobArgs& a, const JobPlanReport& r) {
  const jobs::JobSpec* spec = &r.spec;
  const JobWork* work = &r.work;
  const JobForecast* forecast = &r.forecast;
  const JobPrediction& p = r.forecast.prediction;
  const int batch = r.forecast.batch, max_batch = r.forecast.max_batch;
  const uint64_t memory = spec->memory_bytes.value_or(0);
  const double bandwidth = r.bandwidth_gbps;
  const std::optional<ModelReadProbe>& disk = r.disk;
  const KernelRates& rates = r.rates;
  const std::optional<std::time_t>& deadline = r.deadline;
  const std::time_t now = r.now;
  const PlanTotals t = plan_totals(r);
  const int64_t prompt_rows = t.prompt_rows, decode_rows = t.decode_rows;
  const std::time_t finish = t.finish;
  const double per_item_bytes = t.per_item_bytes, per_item_s = t.per_item_s;

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
        {"schedule", forecast->sweep || forecast->prompt_sweep_rows > 0 ? "sweep" : "passes"},
        {"window_documents", forecast->sweep ? nlohmann::json(forecast->window_documents)
                                             : nlohmann::json(nullptr)},
        {"window_rows", forecast->sweep ? nlohmann::json(forecast->window_rows) : nlohmann::json(nullptr)},
        {"sweeps", forecast->sweeps},
        {"expert_routing", a.routing_profile.empty() ? "uniform" : "routing profile"},
        {"min_memory_bytes", forecast->min_memory_bytes},
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
        {"predicted_boundary_bytes", p.boundary_bytes},
        {"predicted_boundary_seconds", p.boundary_seconds},
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
  return j;
}

std::string plan_job_text(const PlanJobArgs& a, const JobPlanReport& r) {
  const jobs::JobSpec* spec = &r.spec;
  const JobWork* work = &r.work;
  const JobForecast* forecast = &r.forecast;
  const JobPrediction& p = r.forecast.prediction;
  const int batch = r.forecast.batch;
  const uint64_t memory = spec->memory_bytes.value_or(0);
  const bool classify = spec->kind == jobs::JobKind::kClassify;
  const double bandwidth = r.bandwidth_gbps;
  const std::optional<ModelReadProbe>& disk = r.disk;
  const std::optional<std::time_t>& deadline = r.deadline;
  const std::time_t now = r.now;
  const PlanTotals t = plan_totals(r);
  const int64_t prompt_rows = t.prompt_rows, decode_rows = t.decode_rows;
  const std::time_t finish = t.finish;
  const double per_item_bytes = t.per_item_bytes, per_item_s = t.per_item_s;
  std::string out;
  const char* unit = classify ? "document" : "item";
  out += printf_string("job                 %s (%s, %lld items)\n", spec->name.c_str(),
              jobs::job_kind_name(spec->kind), static_cast<long long>(p.items));
  out += printf_string("budget              %s, batch %d (%s), %d rows per pass\n",
              memory ? format_bytes(memory).c_str() : "everything resident", batch,
              a.batch > 0 ? "--batch"
              : memory    ? "the largest this budget holds"
                          : "resident default",
              forecast->rows_per_pass);
  if (forecast->sweep)
    out += printf_string("schedule            layer sweeps: %lld, the largest %d documents (%d rows); windows fill by rows\n",
                         static_cast<long long>(forecast->sweeps), forecast->window_documents,
                         forecast->window_rows);
  if (forecast->prompt_sweep_rows > 0)
    out += printf_string("schedule            prompts in %lld layer sweeps (windows of up to %lld rows), "
                         "decoded in passes\n",
                         static_cast<long long>(forecast->sweeps),
                         static_cast<long long>(forecast->prompt_sweep_rows));
  out += printf_string("tokens              %lld prompt, %lld decoded\n",
              static_cast<long long>(prompt_rows + work->shared_prefix_rows),
              static_cast<long long>(decode_rows));
  out += printf_string("passes              %lld (%lld rows)\n", static_cast<long long>(p.passes),
              static_cast<long long>(p.rows));
  out += printf_string("reads               %s (%s per %s) at %.2f GB/s: %s%s\n",
              format_bytes(static_cast<uint64_t>(p.disk_bytes)).c_str(),
              format_bytes(static_cast<uint64_t>(per_item_bytes)).c_str(), unit, bandwidth,
              hours(p.io_seconds).c_str(),
              a.routing_profile.empty() ? "" : " (experts as the routing profile chose them)");
  if (p.boundary_bytes > 0)
    out += printf_string("boundaries          %s written (layer boundaries saved every %s of a sweep): %s\n",
                         format_bytes(static_cast<uint64_t>(p.boundary_bytes)).c_str(),
                         hours(SchedulerOptions{}.item.checkpoint_interval_s).c_str(),
                         hours(p.boundary_seconds).c_str());
  if (disk)
    out += printf_string(
        "disk                %.2f GB/s reading the model's files for %.0f s (%d passes; "
        "the first half %.2f GB/s)\n",
        disk->gbps, disk->seconds, disk->passes, disk->first_gbps);
  out += printf_string(
      "compute             %.3g TFLOP at the measured kernel rates: %s (%s outside the products)\n",
      p.flops / 1e12, hours(p.compute_seconds).c_str(), hours(p.element_seconds).c_str());
  out += printf_string(
      "predicted           %s (%.1f s per %s: expert reads, then trunk reads or compute), done "
      "%s\n",
      hours(p.seconds).c_str(), per_item_s, unit, local_time(finish).c_str());
  if (deadline)
    out += printf_string("deadline            %s: %s\n", local_time(*deadline).c_str(),
                finish <= *deadline ? "finishes before it" : "does NOT finish before it");
  if (deadline && finish > *deadline)
    out += printf_string("by the deadline     %lld of %lld %ss\n",
                static_cast<long long>(p.items_within(std::difftime(*deadline, now))),
                static_cast<long long>(p.items), unit);
  return out;
}

}  // namespace nj::runner
