// `nightjar plan SPEC.yaml [--bandwidth GBps] [--until HH:MM] [--batch N] [--output json]`:
// a job's night predicted before it is submitted (job_plan.h), with the same batch, budget
// and prefill chunk `run` would use.
#pragma once

#include <string>

namespace nj::runner {

struct PlanJobArgs {
  std::string spec;
  double bandwidth_gbps = 2.6;
  // > 0: instead of bandwidth_gbps, the rate of reading the model's own files for this many
  // seconds as a run reads them (model_read_probe.h).
  double measure_disk_seconds = 0;
  std::string until;      // "HH:MM", or empty
  int batch = 0;          // 0: what run would choose (the budget's largest, 16 resident)
  int prefill_chunk = 0;  // 0: run's default
  int io_threads = 0;     // 0: run's default
  int threads = 0;        // compute threads for the kernel probe, as run's --threads; 0: calibrated
  bool json = false;
};

// Prints the prediction; returns the process exit code (errors reported as the CLI does).
int plan_job(const PlanJobArgs& args);

}  // namespace nj::runner
