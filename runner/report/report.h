// `nightjar report`: the morning summary of one or more jobs, computed from the job store
// (items' states, tokens, timings and the engine usage of migration 002) and rendered as
// text here, as a self-contained HTML page in report_html.h.
//
// Definitions (all over every item of the job and every attempt):
//   tokens generated   sum of the items' stored output tokens (= the sum of `results`'
//                      output_tokens)
//   wall time          last finished_at - first started_at (items not started or not
//                      finished are left out; absent until one item finished)
//   engine time        sum of prefill_s + decode_s: time inside the engine
//   s per token        engine time / tokens generated
//   documents per hour classify: done items / wall time
//   margin             a classification's probability less the runner-up's (the review
//                      list is the lowest margins: the least certain answers)
//   failed attempts    an item's failed attempts, counting those a `retry` reset
//   disk share         io_wait_s / engine time: the share of engine time blocked on weights
//                      from disk (io_wait_s + compute_s when that is larger)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "runner/store/job_store.h"

namespace nj::runner {

// The share of engine time spent waiting on disk, 0..1 (nullopt without engine time). The
// usage is measured inside the engine time, so io_wait_s + compute_s <= engine_s; the
// larger of the two is the denominator all the same, so a share never exceeds 1.
std::optional<double> disk_share(double engine_s, const EngineUsage& usage);

struct ItemReport {
  std::string custom_id;
  ItemState state = ItemState::kQueued;
  int64_t tokens = 0;  // output tokens stored
  std::optional<double> started_at, finished_at;
  double engine_s = 0;  // prefill_s + decode_s
  EngineUsage usage;
  std::optional<std::string> label;       // a classification's answer (result details)
  std::optional<double> label_prob;       // its probability
  std::optional<double> margin;           // its probability less the runner-up's
  std::optional<std::string> last_error;  // failed, cancelled or retried items
  // Failed attempts over the item's whole history: the stored count plus what each `retry`
  // reset (its "retried" events), and how many times it was retried.
  int64_t failed_attempts = 0;
  int64_t retries = 0;

  std::optional<double> wall_s() const;      // nullopt until it has finished
  std::optional<double> disk_share() const;  // 0..1; nullopt without engine time
  std::string label_text() const;            // "billing (p=0.913)", or "" without a label
};

struct JobReport {
  JobRow job;
  int64_t done = 0, failed = 0, cancelled = 0, queued = 0, running = 0;
  int64_t tokens = 0;
  std::optional<double> first_start, last_finish;
  double engine_s = 0;
  EngineUsage usage;
  std::vector<ItemReport> items;  // in spec order
  int homes = 1;  // homes the job's items are in (several: report_combine.h); job.id is the
                  // first part's

  std::vector<std::string> labels;  // a classify job's labels, in the spec's order

  int64_t total() const { return done + failed + cancelled + queued + running; }
  int64_t failed_attempts() const;  // over every item (ItemReport::failed_attempts)
  int64_t retries() const;
  // A classify job's done documents per hour of wall time; nullopt before two finish apart.
  std::optional<double> documents_per_hour() const;
  // Done items per label, every label of the job included (0 when never chosen), in the
  // spec's order and then any other label a result carries.
  std::vector<std::pair<std::string, int64_t>> label_counts() const;
  // The done classifications with the lowest margins, lowest first (ties by spec order):
  // the documents worth a human look. At most `n`.
  std::vector<const ItemReport*> review(size_t n) const;
  // Failures first: a job with failed items or unwritten outputs.
  bool has_failures() const { return failed > 0 || job.outputs_state == "failed"; }
  std::optional<double> wall_s() const;
  std::optional<double> s_per_token() const;  // nullopt before the first token
  double disk_share() const;                  // 0..1
  const char* state() const;  // running, queued, outputs_failed, failed, cancelled, done
};

// Reads one job's items and results. Store errors.
Result<JobReport> build_job_report(JobStore& store, const JobRow& job);

// What the `retry`s of one item reset: a retry queues a failed or cancelled item with its
// attempts at 0 (max_attempts applies afresh), and its "retried" event keeps the count.
struct RetryHistory {
  int64_t retries = 0;
  int64_t attempts = 0;  // failed attempts the retries reset
};

// Per item id, from the job's "retried" events (store/job_store.h); items never retried are
// absent. Store errors.
Result<std::map<int64_t, RetryHistory>> retry_history(JobStore& store, int64_t job_id);

// What a report shows of each job: item lines and the review list's length.
struct ReportOptions {
  size_t max_items = 20;  // per-item lines per job (0 = all); failed items are always listed
  size_t review = 10;     // the lowest-margin documents listed per classify job (0 = none)
};

// The jobs in the order a report shows them: failures first (has_failures), then by id.
std::vector<const JobReport*> failures_first(const std::vector<JobReport>& jobs);

// The text report: a summary across the jobs (one line each, failures first, then every
// failed item with its attempts and error), then each job's figures, its label counts and
// review list (classify), and its item lines.
std::string report_text(const std::vector<JobReport>& jobs, const ReportOptions& options);

// The same as one JSON object (`report --output json`):
//   {"generated_at": UNIX_S, "jobs": [{"id", "name", "kind", "state", "model", "homes",
//     "counts": {"done", "failed", "cancelled", "queued", "running", "total"},
//     "failed_attempts", "retries", "tokens", "wall_s", "engine_s", "disk_share", "bytes_read",
//     "outputs": null | {"state", "error"},
//     "failed_items": [{"custom_id", "failed_attempts", "retries", "error"}],
//     classify only: "documents_per_hour", "label_counts": {LABEL: N},
//                    "review": [{"custom_id", "label", "margin"}] (lowest margin first)}]}
// jobs in failures-first order.
nlohmann::json report_json(const std::vector<JobReport>& jobs, double generated_at,
                           const ReportOptions& options);

// The job's declared outputs: "written <time>", or "NOT WRITTEN: <error> (...)".
// REQUIRES: job.outputs_state.
std::string outputs_text(const JobRow& job);

// "2026-11-30 07:41:04 UTC".
std::string format_utc(double unix_s);
// "3.25 s" under 10 s, "42.5 s" under 2 min, else "12.3 min".
std::string format_seconds(double s);
// The disk share as a percentage with one decimal ("18.2%").
std::string format_share(double share);

}  // namespace nj::runner
