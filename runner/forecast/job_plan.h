// A job's night, predicted: the runner's passes replayed on paper and costed by the engine's
// cost model (engine/plan/pass_cost.h). Used by `nightjar plan SPEC` and the ETA of
// `nightjar status`.
//
// The replay follows the scheduler and PassGroup (scheduler.cpp, pass_group.cpp): up to
// `batch` items at once, taken in queue order; an item that ends gives its place to the next
// queued one before the next pass; every pass carries one step of each waiting member,
// oldest waiter first, up to `max_rows` rows (a step that does not fit waits for the next
// pass). An item's steps are what ItemRun and ClassifyRun feed: its prompt in chunks of
// `prefill_chunk`, then one row per decode step (a generation decodes max_tokens − 1 rows:
// the last token needs no pass; a classification walks its label trie, one row per token of
// the trie's feed paths). A classification's template prefix is prefilled once, by the
// job's first item, before the others start (they restore its state).
// Every step computes the logits of its last row. A speculating job's plan holds its draft
// rows (rows_per_pass, memory), but the replay decodes one row per item and pass, as if no
// draft were ever accepted: how many are depends on the text, which the plan cannot know. Among
// members a pass woke together, the replay takes them in the order they joined, `run` in the order
// their threads come back; so when their steps do not all fit a pass, the pass count may differ by
// a little. Documents that wait at the prefix gate join the first pass after the prefix is saved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/pass_cost.h"
#include "engine/plan/sweep_plan.h"
#include "engine/util/status.h"
#include "jobs/spec/job_spec.h"
#include "runner/run/scheduler.h"
#include "runner/store/job_store.h"

namespace nj::runner {

struct ItemWork {
  int64_t start_position = 0;  // positions its state holds before its first step
  int64_t prompt_rows = 0;     // fed in prefill chunks
  int64_t decode_rows = 0;     // one row per pass
};

struct JobWork {
  std::vector<ItemWork> items;     // in the order the scheduler claims them
  int64_t shared_prefix_rows = 0;  // classify: the template prefix, prefilled once first
  int64_t prefix_rows = 0;         // classify: the template prefix's length (done or not)
  int label_branches = 0;          // classify: the label trie's feed paths
};

struct JobPlanShape {
  int batch = 1;      // items sharing passes
  int max_rows = 64;  // rows a pass may carry (the plan's activations)
  int prefill_chunk = 64;
  // Prompts of at most this many rows go through a sweep when their item joins, in windows
  // of the items joining together (ModelPlan::prompt_sweep_rows); 0: fed in passes.
  int64_t prompt_sweep_rows = 0;
};

struct JobPrediction {
  int64_t items = 0;
  int64_t passes = 0;  // forward passes and layer sweeps
  int64_t sweeps = 0;  // of which a generation's prompt sweeps
  int64_t rows = 0;
  int max_batch = 0;      // the most items that shared a pass
  double load_bytes = 0;  // read when the model opens (pass_cost.h), part of disk_bytes
  double disk_bytes = 0, flops = 0;
  double io_seconds = 0, compute_seconds = 0;  // summed over passes, each its own bound
  double element_seconds = 0;                  // compute outside the products (pass_cost.h)
  double expert_seconds = 0;                   // the routed experts' compute (pass_cost.h)
  double seconds = 0;                          // the load, then Σ per pass (pass_cost.h)
  // Sweeps: their layer boundaries saved every interval of work (runner/durable/
  // sweep_boundaries.h), bytes written and the seconds they add (part of `seconds`).
  double boundary_bytes = 0, boundary_seconds = 0;
  std::vector<double> finished_at;  // seconds from the start at which each item ends, in order

  // Items ended within `seconds` of the start.
  int64_t items_within(double seconds) const;
};

// The work of every item of `spec`. REQUIRES: prompts tokenized (jobs/spec_model.h).
// InvalidArgument when a classify job's labels do not make a trie.
Result<JobWork> job_work(const jobs::JobSpec& spec);

JobPrediction predict_job(const JobWork& work, const JobPlanShape& shape,
                          const PassCostModel& cost);

// What saving a sweep's layer boundaries costs: a file of every window row's residual stream
// and bank entries (at most `bytes_per_row` each, at the deepest boundary) every `interval_s`
// of work, at most once per boundary, written at `write_gbps`.
struct BoundaryCost {
  double bytes_per_row = 0;
  int boundaries = 0;  // layers - 1
  double interval_s = 120;
  double write_gbps = 1;
};

// A classify job's layer sweep windows as `run` claims them: each starts with the first item
// not yet in one and takes every later item that still fits beside it (`empty`, as the plan
// fills a window), in the items' order. Each window lists its items' places in `work.items`.
std::vector<std::vector<size_t>> sweep_windows(const JobWork& work, const SweepWindowFill& empty);

// The same for a classify job's layer sweeps (engine/sweep/sweep.h): `windows` of its items,
// each one pass over the weights carrying all its rows (the job's template prefix, the
// documents after it and their label branches), with its boundary saves; a window's
// documents end together.
JobPrediction predict_sweeps(const JobWork& work, const std::vector<std::vector<size_t>>& windows,
                             const PassCostModel& cost, const BoundaryCost& boundary = {});

// What a classify job's documents bring to a sweep's window (engine/plan/sweep_plan.h).
SweepWork sweep_work(const JobWork& work);

// A job as `run` would do it: its model and budget, run's plan options for its kind and
// context (scheduler.h), and run's batch for that budget.
struct JobRunShape {
  std::string model_dir;
  uint64_t memory_bytes = 0;  // 0: everything resident
  bool classify = false;
  int64_t context = 1;    // the job's longest sequence
  int batch = 0;          // --batch, or 0 for run's choice
  int prefill_chunk = 0;  // --prefill-chunk, or 0 for run's default
  int io_threads = 0;     // --io-threads, or 0 for run's default
  // A generate job's `speculative:`: the plan then holds draft rows as run's does
  // (plan_model, engine/runtime/model_plan.h).
  jobs::SpeculativeMode speculative = jobs::SpeculativeMode::kOff;
  Schedule schedule = Schedule::kAuto;  // a classify job's, as `run --schedule`
  // A routing profile's file (`plan --routing-profile`), recorded on this model, or empty
  // (uniform routing).
  std::string routing_profile;
};

struct JobForecast {
  JobPrediction prediction;
  uint64_t min_memory_bytes = 0;  // the least budget for this schedule (one item, one document)
  bool sweep = false;        // classify: layer sweeps (else token-major passes)
  int window_documents = 0;  // documents per sweep
  int window_rows = 0;       // rows per sweep
  int64_t sweeps = 0;
  int64_t prompt_sweep_rows = 0;  // a generation: its prompts' sweep windows (0: passes)
  int batch = 1;
  int max_batch = 0;      // what the budget holds (0 when everything is resident)
  int rows_per_pass = 1;  // with drafts: batch x (1 + draft_tokens) decode rows at most
  int draft_tokens = 0;   // drafts per item and pass the plan holds (speculative jobs)
};

// The work a stored job has left: queued items whole, running ones from their stored
// tokens on (a running item that has none yet is counted from its prompt), the shared
// prefix only when no item has passed it yet. `shape` gets the job's model, budget, kind
// and context. InvalidArgument when the job's stored settings are unreadable.
Result<JobWork> remaining_work(const JobRow& job, const std::vector<ItemRow>& items,
                               JobRunShape* shape);

// Plans the model for `shape` (headers only) and replays `work` on it. Probes `rates`'
// experts first when they were not measured for this model's expert shape
// (KernelRates::measure_experts). Errors: the model's (not found, unreadable headers) and
// the planner's (a budget below the minimum).
Result<JobForecast> forecast_job(const JobWork& work, const JobRunShape& shape, KernelRates& rates,
                                 double bandwidth_gbps);

}  // namespace nj::runner
