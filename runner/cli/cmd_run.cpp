// `nightjar run`: work through the queued items of the home's store until the queue is empty
// (--drain), --max-items have finished, the --until deadline or a signal. With --exclusive
// it first takes the home's lock (home_lock.h).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/io/read_pool.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/run/model_args.h"
#include "runner/cli/output.h"
#include "runner/run/home_lock.h"
#include "runner/item/progress.h"
#include "runner/run/scheduler.h"
#include "runner/item/stop.h"
#include "runner/store/home.h"
#include "runner/store/job_label.h"

namespace nj::runner {

namespace {

void add_schedule_option(CLI::App& sub, std::string& schedule) {
  sub.add_option("--schedule", schedule,
                 "How classify jobs go through the model: sweep (layer by layer for a window of "
                 "documents: each weight read once per window), passes (token-major passes), or "
                 "auto (default: sweep whenever a window holds more than one document). Generate "
                 "jobs whose weights stream under their budget sweep their items' prompts before "
                 "decoding them in passes, unless passes. The results are the same bits either way")
      ->capture_default_str();
}

Status apply_schedule(const std::string& name, SchedulerOptions& options) {
  NJ_ASSIGN_OR_RETURN(options.schedule, parse_schedule(name));
  return Status();
}

std::string local_datetime(std::time_t t) {
  char buf[40];
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %Z", &tm);
  return buf;
}

// "1 item", "3 items".
std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// An --until HH:MM that passed less than this long ago is refused rather than read as
// tomorrow: `--until 18:38` at 18:39 is a time that was meant for today (a late start, a
// typo), and a run until tomorrow's 18:38 would take the whole day. Times further back
// (`--until 07:00` at 22:00) are the next morning, as a nightly timer means them.
constexpr double kUntilJustPassed_s = 3600;

// --until: "HH:MM" (its next occurrence: today if still ahead, else tomorrow, unless it
// passed within kUntilJustPassed_s) or a date and time "YYYY-MM-DD HH:MM" (also with a T),
// local time. A date and time must lie ahead of `now` and at most 24 hours away: a run is
// one night.
Result<std::time_t> parse_until(const std::string& text, std::time_t now) {
  if (text.size() > 5) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), "%Y-%m-%d %H:%M", &tm);
    if (!end || *end) end = strptime(text.c_str(), "%Y-%m-%dT%H:%M", &tm);
    if (!end || *end)
      return invalid_argument("'" + text + "': expected HH:MM or YYYY-MM-DD HH:MM (local time)");
    tm.tm_isdst = -1;
    const std::time_t at = std::mktime(&tm);
    if (at <= now)
      return invalid_argument("'" + text + "' (" + local_datetime(at) + ") has passed");
    if (at - now > 24 * 3600)
      return invalid_argument("'" + text + "' (" + local_datetime(at) +
                              ") is more than 24 hours away");
    return at;
  }
  NJ_ASSIGN_OR_RETURN(ClockTime clock, parse_clock_time(text));
  const std::time_t at = next_occurrence(clock, now);
  const double passed_s = 24 * 3600 - std::difftime(at, now);  // since today's occurrence
  if (passed_s > 0 && passed_s < kUntilJustPassed_s) {
    std::string tomorrow = local_datetime(at);
    tomorrow = tomorrow.substr(0, tomorrow.rfind(' '));  // without the zone
    const int minutes = static_cast<int>(passed_s / 60);
    const std::string ago = minutes == 0 ? "under a minute" : plural(minutes, "minute", "minutes");
    return invalid_argument("'" + text + "' passed " + ago + " ago (it is " + local_datetime(now) +
                            "); for tomorrow's, give the date: --until '" + tomorrow + "'");
  }
  return at;
}

// The exit-4 line: how many items failed, naming each job by id and name.
std::string failed_items_text(const RunSummary& summary) {
  std::string jobs;
  std::vector<int64_t> seen;
  for (const FailedItem& f : summary.failed_items) {
    if (std::find(seen.begin(), seen.end(), f.job_id) != seen.end()) continue;
    seen.push_back(f.job_id);
    std::string ids;
    for (const FailedItem& g : summary.failed_items)
      if (g.job_id == f.job_id) ids += (ids.empty() ? "" : ", ") + g.custom_id;
    jobs += (jobs.empty() ? "" : "; ") + job_label(f.job_id, f.job_name) + ": " + ids;
  }
  return plural(summary.failed, "item", "items") + " failed for good during this run: " + jobs +
         " (nightjar status JOB gives the errors; nightjar retry JOB [ITEM...] queues them again)";
}

// [{"id", "name"}] of jobs named by id and name.
nlohmann::json jobs_json(const std::vector<std::pair<int64_t, std::string>>& jobs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, name] : jobs) out.push_back({{"id", id}, {"name", name}});
  return out;
}

// `run --stats`: what the run's passes read and computed, all items together, as the model
// commands' --stats line says it for one run of the model (the same figures are in
// --output json and in the store's run_ended event).
std::string run_stats_text(const RunSummary& s, double seconds) {
  const PassTotals& t = s.passes;
  const double passes = static_cast<double>(std::max<uint64_t>(1, t.passes));
  return "read " + format_bytes(static_cast<uint64_t>(std::llround(t.bytes_read))) + " in " +
         plural(static_cast<int64_t>(t.passes), "pass", "passes") +
         (t.sweeps ? " (" + plural(static_cast<int64_t>(t.sweeps), "layer sweep", "layer sweeps") +
                         ")"
                   : std::string()) +
         ", " + format_bytes(static_cast<uint64_t>(std::llround(t.bytes_read / passes))) +
         " per pass; waited " + fmt::format("{:.3f}", t.wait_s) + " s on I/O, computed " +
         fmt::format("{:.3f}", t.compute_s) + " s; " +
         plural(static_cast<int64_t>(t.rows), "row", "rows") + " fed, up to " +
         plural(t.max_sequences, "item", "items") + " per pass; " +
         plural(s.tokens, "output token", "output tokens") + " in " +
         fmt::format("{:.1f}", seconds) + " s; peak RSS " + format_bytes(peak_rss_bytes());
}

// `run --output json`: the run's summary, one object on stdout at its end.
nlohmann::json run_json(const RunSummary& s, double seconds, std::optional<std::time_t> deadline) {
  nlohmann::json failed = nlohmann::json::array();
  for (const FailedItem& f : s.failed_items)
    failed.push_back({{"job", {{"id", f.job_id}, {"name", f.job_name}}},
                      {"custom_id", f.custom_id},
                      {"error", f.error}});
  return {{"end_reason", s.end_reason},
          {"done", s.done},
          {"failed", s.failed},
          {"failed_attempts", s.failed_attempts},
          {"stopped", s.stopped},
          {"outputs_failed", s.outputs_failed},
          {"outputs_failed_jobs", jobs_json(s.outputs_failed_jobs)},
          {"tokens", s.tokens},
          {"passes", s.passes.passes},
          {"sweeps", s.passes.sweeps},
          {"rows", s.passes.rows},
          {"max_batch", s.passes.max_sequences},
          {"bytes_read", static_cast<uint64_t>(std::llround(s.passes.bytes_read))},
          {"compute_s", s.passes.compute_s},
          {"io_wait_s", s.passes.wait_s},
          {"seconds", seconds},
          {"deadline", deadline ? nlohmann::json(local_datetime(*deadline)) : nlohmann::json()},
          {"failed_items", failed}};
}

struct RunArgs {
  std::string home;
  std::string until;
  bool drain = false;
  bool exclusive = false;
  int64_t max_items = 0;
  ModelArgs compute;
  SchedulerOptions sched;
  double log_interval_s = 30;
  std::string schedule = "auto";
  std::string output = "text";
  std::string memory;  // refused with the reason: a job's budget is its own
  bool stats = false;
};

// When items commit, checkpoint and hold their leases, and how an idle or failing run waits.
void add_cadence_options(CLI::App& sub, SchedulerOptions& sched) {
  ItemRunOptions& item = sched.item;
  sub.add_option("--commit-tokens", item.commit_tokens,
                  "Store output tokens when this many are pending (default 64)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--commit-seconds", item.commit_interval_s,
                  "... or when this long has passed since the last commit (default 1)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--checkpoint-tokens", item.checkpoint_tokens,
                  "Save a state checkpoint every this many tokens (default 2048)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--checkpoint-seconds", item.checkpoint_interval_s,
                  "... or every this many seconds (default 120)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--lease-seconds", sched.lease_s,
                  "How long an item's lease holds without a heartbeat (default 600)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--retry-seconds", sched.retry_s,
                  "Wait before retrying an item whose model cannot be opened; doubles with "
                  "each failed attempt, at most an hour (default 60)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--poll-seconds", sched.poll_interval_s,
                  "How often an idle run looks for new work (default 5)")
      ->check(CLI::PositiveNumber);
  // Engineering switch (hidden): classify items feed the template prefix themselves instead
  // of restoring the job's prefix state, for benchmarks of what the reuse saves.
  sub.add_flag_function(
         "--no-prefix-reuse", [p = &item](int64_t) { p->prefix_reuse = false; },
         "Classify items prefill the template prefix themselves (benchmarks)")
      ->group("");
}

// `nightjar run`: the queue, crash-safely, until it drains, --until or a signal.
int run_command(RunArgs a, const GlobalOptions& global) {
  StopControl::install_signal_handlers();  // first: a signal during start-up stops gracefully too
  auto home = resolve_home(a.home);
  if (!home.ok()) return report_usage_error("--home", home.status());
  if (!a.memory.empty())
    return report_usage_error(
        "--memory", invalid_argument("a job's memory budget is part of the job: `memory:` in "
                                     "its spec, or `submit --openai-batch ... --memory SIZE`"));
  std::optional<std::time_t> deadline;
  std::string until_text;
  if (!a.until.empty()) {
    const std::time_t now = std::time(nullptr);
    auto t = parse_until(a.until, now);
    if (!t.ok()) return report_usage_error("--until", t.status());
    deadline = *t;
    until_text = a.until + " (" + local_datetime(*deadline) + ", in " +
                 format_duration(std::difftime(*deadline, now)) + ")";
  }
  if (Status s = apply_compute_options(a.compute); !s.ok())
    return report_usage_error("--simd", s);
  if (Status s = apply_schedule(a.schedule, a.sched); !s.ok())
    return report_usage_error("--schedule", s);
  // Only `submit` creates a home: a mistyped --home or NIGHTJAR_HOME (a timer's environment)
  // must fail the night (exit 3, naming the path), not run an empty queue and exit 0.
  auto store = open_home_store(*home, /*create=*/false);
  if (!store.ok()) return report_failure(store.status());
  StopControl stop(deadline, a.until);
  auto lock = HomeLock::acquire(*home, stop, a.exclusive);
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kCancelled) return kExitOk;  // a graceful stop
    return report_failure(lock.status());
  }

  const bool tty = isatty(STDERR_FILENO) && global.verbosity >= 0;
  auto status_line = setup_run_logging(tty, global.verbosity, home->log_path());
  ProgressReporter progress(status_line, a.log_interval_s);
  SchedulerOptions options = a.sched;
  options.drain = a.drain;
  options.exclusive = a.exclusive;
  if (a.max_items > 0) options.max_items = a.max_items;
  spdlog::info("run started (pid {}, home {}{})", getpid(), home->dir,
               deadline ? ", until " + until_text : std::string());
  const auto started = std::chrono::steady_clock::now();
  auto summary = run_queue(*home, **store, options, stop, progress);
  if (!summary.ok()) return report_failure(summary.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (a.output == "json") print_json(run_json(*summary, seconds, deadline));
  if (a.stats) std::fprintf(stderr, "stats: %s\n", run_stats_text(*summary, seconds).c_str());
  if (summary->outputs_failed > 0) {
    std::string jobs;
    for (const auto& [id, name] : summary->outputs_failed_jobs)
      jobs += (jobs.empty() ? "" : ", ") + job_label(id, name);
    spdlog::error(
        "the outputs of {} could not be written (nightjar status shows why; "
        "nightjar results JOB --write writes them again)",
        jobs);
    return kExitFailure;
  }
  if (summary->failed > 0) {
    spdlog::error("{}", failed_items_text(*summary));
    return kExitItemsFailed;
  }
  return kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, const GlobalOptions& global, CommandTable& table) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* sub =
      app.add_subcommand("run", "Run queued items, many per pass over the weights, crash-safely");
  add_home_option(*sub, a->home);
  sub->add_option("--until", a->until,
                  "Stop gracefully at this local time, e.g. 07:00 (its next occurrence; a time "
                  "that passed within the hour is refused), or '2026-12-08 07:00' (at most 24 h "
                  "away); the log states the date");
  sub->add_flag("--drain", a->drain, "Exit when nothing is queued (default: wait for new work)");
  sub->add_flag("--exclusive", a->exclusive,
                "The only run on this home: lock it (run.lock) and take over at once the items "
                "that runs on any host left running (a requeued Slurm task)");
  sub->add_option("--max-items", a->max_items,
                  "Exit after this many items finished (done or failed)")
      ->check(CLI::PositiveNumber);
  add_compute_options(*sub, a->compute);
  sub->add_option("--prefill-chunk", a->sched.prefill_chunk, "Tokens per prefill pass")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option(
         "--batch", a->sched.batch,
         "Items per pass over the weights (default: the largest batch the job's memory budget "
         "holds, 16 when everything is resident); each item's output is what it would be alone")
      ->check(CLI::PositiveNumber);
  add_schedule_option(*sub, a->schedule);
  sub->add_option("--io-threads", a->sched.io_threads,
                  "Reads in flight when a job's memory budget streams (default 8, at most " +
                      std::to_string(kMaxIoThreads) + ")")
      ->check(CLI::Range(1, kMaxIoThreads));
  add_cadence_options(*sub, a->sched);
  sub->add_option("--log-seconds", a->log_interval_s,
                  "Progress log line interval when stderr is not a terminal (default 30)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--output", a->output,
                  "text, or json: the run's summary as one JSON object on stdout at its end")
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--stats", a->stats,
                "At the end, print what the run's passes read and computed (bytes read, waits, "
                "rows, the largest batch, peak RSS), as the model commands' --stats");
  // Accepted only to say why not: a job's memory budget is part of the job.
  sub->add_option("--memory", a->memory, "")->group("");
  table.emplace_back(sub, [a, &global]() -> int { return run_command(*a, global); });
}

}  // namespace nj::runner
