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
//   disk share         io_wait_s / engine time: the share of engine time blocked on weights
//                      from disk (io_wait_s + compute_s when that is larger)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  std::optional<std::string> last_error;  // failed, cancelled or retried items

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

  int64_t total() const { return done + failed + cancelled + queued + running; }
  std::optional<double> wall_s() const;
  std::optional<double> s_per_token() const;  // nullopt before the first token
  double disk_share() const;                  // 0..1
  const char* state() const;  // running, queued, outputs_failed, failed, cancelled, done
};

// Reads one job's items and results. Store errors.
Result<JobReport> build_job_report(JobStore& store, const JobRow& job);

// The text summary of each job, blank-line separated, with up to `max_items` per-item
// lines per job (0 = every item).
std::string report_text(const std::vector<JobReport>& jobs, size_t max_items);

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
