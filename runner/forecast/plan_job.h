// `nightjar plan SPEC.yaml [--bandwidth GBps] [--until HH:MM] [--batch N] [--output json]`:
// a job's night predicted before it is submitted (job_plan.h), with the same batch, budget
// and prefill chunk `run` would use.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/plan/kernel_rates.h"
#include "engine/util/status.h"
#include "jobs/openai/openai_batch.h"
#include "jobs/spec/job_spec.h"
#include "runner/forecast/job_plan.h"
#include "runner/forecast/model_read_probe.h"
#include "runner/store/job_store.h"

namespace nj::runner {

struct PlanJobArgs {
  std::string spec;  // a spec file; or, for plan_openai_batch / plan_stored_job, a label
  double bandwidth_gbps = 2.6;
  // > 0: instead of bandwidth_gbps, the rate of reading the model's own files for this many
  // seconds as a run reads them (model_read_probe.h).
  double measure_disk_seconds = 0;
  std::string until;      // "HH:MM", or empty (the command line parses it into a deadline)
  int batch = 0;          // 0: what run would choose (the budget's largest, 16 resident)
  int prefill_chunk = 0;  // 0: run's default
  int io_threads = 0;     // 0: run's default
  int threads = 0;        // compute threads for the kernel probe, as run's --threads; 0: calibrated
  Schedule schedule = Schedule::kAuto;  // a classify job's, as run's --schedule
  std::string routing_profile;  // --routing-profile: measured routing instead of uniform
  bool json = false;
};

// The prediction and what it was made from.
struct JobPlanReport {
  jobs::JobSpec spec;
  JobWork work;
  JobForecast forecast;
  double bandwidth_gbps = 0;           // given, or measured (disk)
  std::optional<ModelReadProbe> disk;  // --measure-disk's probe
  KernelRates rates;
  std::time_t now = 0;
  std::optional<std::time_t> deadline;  // --until's next occurrence after `now`
};

// Loads and binds the spec, measures what was asked for and predicts the job's night.
// Errors: the spec's, the probe's or the planner's (the CLI reports them).
Result<JobPlanReport> plan_job(const PlanJobArgs& args, std::time_t now,
                               std::optional<std::time_t> deadline);

// The same for an OpenAI Batch API input file (`plan --openai-batch FILE --model DIR
// [--memory SIZE]`): the job `submit --openai-batch` would queue. Errors: the file's (line
// named), the model's, the probe's or the planner's.
Result<JobPlanReport> plan_openai_batch(const PlanJobArgs& args, const jobs::OpenAiBatchJob& batch,
                                        std::time_t now, std::optional<std::time_t> deadline);

// The same for a job in the store (`plan JOB`): the work its queued and running items have
// left (remaining_work, as the status ETA), under its stored model, budget and kind. The
// report's `spec` carries the job's name, kind, model and budget only (no items).
// FailedPrecondition when nothing is left (every item finished).
Result<JobPlanReport> plan_stored_job(const PlanJobArgs& args, const JobRow& job,
                                      const std::vector<ItemRow>& items, std::time_t now,
                                      std::optional<std::time_t> deadline);

// The report as `plan --output json` prints it (one object) and as text (lines).
nlohmann::json plan_job_json(const PlanJobArgs& args, const JobPlanReport& report);
std::string plan_job_text(const PlanJobArgs& args, const JobPlanReport& report);

}  // namespace nj::runner
