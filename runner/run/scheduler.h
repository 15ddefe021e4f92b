// The `run` loop: claims items (priority, then FIFO) up to a batch of one model and budget,
// runs each on its own thread through a PassGroup so that one pass over the weights serves
// them all, keeps the batch full (when an item finishes, fails, stops or is cancelled the
// next queued item of the same model joins at the next pass), and repeats until the queue
// is empty (--drain), --max-items items have finished, the deadline passes or a signal
// arrives. Each item keeps its own commits, checkpoints and lease; its tokens are those it
// would produce alone. A job of another model starts once the batch has drained.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/plan/planner.h"
#include "engine/plan/sweep_plan.h"
#include "engine/runtime/model_plan.h"
#include "engine/speculative/draft_length.h"
#include "jobs/spec/job_spec.h"
#include "runner/item/item_runner.h"
#include "runner/item/pass_group.h"
#include "runner/item/progress.h"
#include "runner/item/stop.h"
#include "runner/store/home.h"
#include "runner/store/job_store.h"

namespace nj::runner {

enum class Schedule { kAuto, kSweep, kPasses };
const char* schedule_name(Schedule s);  // "auto", "sweep", "passes"
// InvalidArgument naming the known values for anything else.
Result<Schedule> parse_schedule(const std::string& name);

struct SchedulerOptions {
  ItemRunOptions item;
  // How long a lease holds without a heartbeat (sent every lease_s / 4 by a background
  // thread). Only a stuck process or another host waits this long: a lease whose process
  // died on this host is reclaimed at once.
  double lease_s = 600;
  bool drain = false;  // exit when nothing is queued (else wait for work)
  // The caller holds the home's lock (home_lock.h): no other run works on this home, so every
  // lease held by another owner, on any host, is left by a dead run and reclaimed at once.
  bool exclusive = false;
  std::optional<int64_t> max_items;          // exit after this many items finished (done or failed)
  double poll_interval_s = 5;                // how often an idle run looks for new work
  int prefill_chunk = kDefaultPrefillChunk;  // engine SessionOptions::prefill_chunk
  int io_threads = 8;                        // reads in flight when a job's budget streams weights
  // Items per pass (--batch). 0: the largest batch the job's budget holds (the planner's
  // max_batch), kDefaultResidentBatch when everything is resident. 1: one item at a time.
  int batch = 0;
  // How a classify job's documents go through the model (--schedule): kSweep, layer by layer
  // for a window of documents (engine/sweep/sweep.h; the window is what the budget holds,
  // engine/plan/sweep_plan.h); kPasses, token-major passes; kAuto, the sweep whenever its
  // window holds more than one document. Generate jobs always decode in passes.
  Schedule schedule = Schedule::kAuto;
  // When an item's model cannot be opened (a disk not mounted yet, a model being copied),
  // its next attempt waits this long, twice as long after each further failure, at most
  // kMaxRetryWait_s: a missing model must not burn every attempt of the queue in a moment.
  double retry_s = 60;
};

// The batch decisions are the engine's (engine/runtime/model_plan.h).
using nj::kDefaultResidentBatch;
using nj::kMaxDefaultBatch;

// The most drafts per item per pass `run` plans for a speculating generate job; each item's
// draft length adapts below it (engine/speculative/draft_length.h).
using nj::kRunDraftTokens;

// A classify job's layer sweeps under run's rules (engine/plan/sweep_plan.h): the window the
// request's budget holds for `work`, its documents cut to the request's batch (--batch) when
// given. nullopt: the job goes in token-major passes (--schedule passes, or auto when a window
// would hold one document or not even one fits). Errors: the planner's under --schedule sweep.
struct SweepDecision {
  SweepWindowPlan window;
  int documents = 0;  // per sweep, every document as long as the job's longest
  int max_documents =
      0;  // the most a window takes, filled by rows (SweepWindowFill): --batch, else the items'
};
Result<std::optional<SweepDecision>> decide_sweep(const ModelLayout& layout,
                                                  const ModelRequest& request,
                                                  const SweepWork& work, Schedule schedule);

// The queued and running items of the jobs whose items could share a batch with `job`'s
// (the same model, budget and kind).
int64_t items_for_batch(const std::vector<JobSummary>& jobs, const JobRow& job);

// The longest backoff wait, however many attempts failed.
inline constexpr double kMaxRetryWait_s = 3600;

// An item that failed for good during a run: what the run's end names (exit 4).
struct FailedItem {
  int64_t job_id = 0;
  std::string job_name;
  std::string custom_id;
  std::string error;
};

struct RunSummary {
  int64_t done = 0;
  int64_t failed = 0;            // items that failed for good
  std::vector<FailedItem> failed_items;  // those items, in the order they failed
  int64_t failed_attempts = 0;   // attempts that failed (item requeued)
  int64_t stopped = 0;           // items put back by a graceful stop
  int64_t outputs_failed = 0;    // jobs whose declared outputs could not be written
  std::vector<std::pair<int64_t, std::string>> outputs_failed_jobs;  // those jobs' ids and names
  int64_t tokens = 0;            // output tokens generated by this process
  PassTotals passes;             // what the passes did, all items together
  SpeculationStats speculation;  // what speculation did, all items' attempts together
  std::string end_reason;        // "queue empty", "SIGTERM", "deadline 07:00", "--max-items 3"
};

// Works through the queue. A Status only for failures of the run itself (the store, a full
// disk, a thread that cannot start): the process should exit 1, and the lease of the item it
// held is released first (queued again, attempts unchanged), so the item neither shows as
// running nor is charged an attempt as if the process had died. Engine and input errors are
// recorded as failed attempts and the loop goes on.
Result<RunSummary> run_queue(const Home& home, JobStore& store, const SchedulerOptions& options,
                             StopControl& stop, ProgressReporter& progress);

}  // namespace nj::runner
