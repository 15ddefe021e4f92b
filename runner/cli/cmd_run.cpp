// `nightjar run`: work through the queued items of the home's store until the queue is empty
// (--drain), --max-items have finished, the --until deadline or a signal. With --exclusive
// it first takes the home's lock (home_lock.h).
#include <unistd.h>

#include <ctime>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "engine/io/read_pool.h"
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

namespace nj::runner {

namespace {

void add_schedule_option(CLI::App& sub, std::string& schedule) {
  sub.add_option("--schedule", schedule,
                 "How classify jobs go through the model: sweep (layer by layer for a window of "
                 "documents: each weight read once per window), passes (token-major passes), or "
                 "auto (default: sweep whenever a window holds more than one document); the "
                 "results are the same bits either way")
      ->capture_default_str();
}

Status apply_schedule(const std::string& name, SchedulerOptions& options) {
  NJ_ASSIGN_OR_RETURN(options.schedule, parse_schedule(name));
  return Status();
}

}  // namespace

void add_run_command(CLI::App& app, const GlobalOptions& global, CommandTable& table) {
  struct Args {
    std::string home;
    std::string until;
    bool drain = false;
    bool exclusive = false;
    int64_t max_items = 0;
    ModelArgs compute;
    SchedulerOptions sched;
    double log_interval_s = 30;
    std::string schedule = "auto";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("run", "Run queued items, many per pass over the weights, crash-safely");
  add_home_option(*sub, a->home);
  sub->add_option("--until", a->until, "Stop gracefully at this local time of day, e.g. 07:00");
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
  ItemRunOptions& item = a->sched.item;
  sub->add_option("--commit-tokens", item.commit_tokens,
                  "Store output tokens when this many are pending (default 64)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--commit-seconds", item.commit_interval_s,
                  "... or when this long has passed since the last commit (default 1)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--checkpoint-tokens", item.checkpoint_tokens,
                  "Save a state checkpoint every this many tokens (default 2048)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--checkpoint-seconds", item.checkpoint_interval_s,
                  "... or every this many seconds (default 120)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--lease-seconds", a->sched.lease_s,
                  "How long an item's lease holds without a heartbeat (default 600)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--retry-seconds", a->sched.retry_s,
                  "Wait before retrying an item whose model cannot be opened; doubles with "
                  "each failed attempt, at most an hour (default 60)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--poll-seconds", a->sched.poll_interval_s,
                  "How often an idle run looks for new work (default 5)")
      ->check(CLI::PositiveNumber);
  // Engineering switch (hidden): classify items feed the template prefix themselves instead
  // of restoring the job's prefix state, for benchmarks of what the reuse saves.
  sub->add_flag_function(
         "--no-prefix-reuse", [&item](int64_t) { item.prefix_reuse = false; },
         "Classify items prefill the template prefix themselves (benchmarks)")
      ->group("");
  sub->add_option("--log-seconds", a->log_interval_s,
                  "Progress log line interval when stderr is not a terminal (default 30)")
      ->check(CLI::PositiveNumber);
  table.emplace_back(sub, [a, &global]() -> int {
    StopControl::install_signal_handlers();  // first: a signal during start-up stops gracefully too
    auto home = resolve_home(a->home);
    if (!home.ok()) return report_usage_error("--home", home.status());
    std::optional<std::time_t> deadline;
    if (!a->until.empty()) {
      auto t = parse_clock_time(a->until);
      if (!t.ok()) return report_usage_error("--until", t.status());
      deadline = next_occurrence(*t, std::time(nullptr));
    }
    if (Status s = apply_compute_options(a->compute); !s.ok())
      return report_usage_error("--simd", s);
    if (Status s = apply_schedule(a->schedule, a->sched); !s.ok())
      return report_usage_error("--schedule", s);
    auto store = open_home_store(*home, /*create=*/true);
    if (!store.ok()) return report_failure(store.status());
    StopControl stop(deadline, a->until);
    auto lock = HomeLock::acquire(*home, stop, a->exclusive);
    if (!lock.ok()) {
      if (lock.status().code() == StatusCode::kCancelled) return kExitOk;  // a graceful stop
      return report_failure(lock.status());
    }

    const bool tty = isatty(STDERR_FILENO) && global.verbosity >= 0;
    auto status_line = setup_run_logging(tty, global.verbosity, home->log_path());
    ProgressReporter progress(status_line, a->log_interval_s);
    SchedulerOptions options = a->sched;
    options.drain = a->drain;
    options.exclusive = a->exclusive;
    if (a->max_items > 0) options.max_items = a->max_items;
    spdlog::info("run started (pid {}, home {}{})", getpid(), home->dir,
                 deadline ? ", until " + a->until : std::string());
    auto summary = run_queue(*home, **store, options, stop, progress);
    if (!summary.ok()) return report_failure(summary.status());
    if (summary->outputs_failed > 0) {
      spdlog::error(
          "the outputs of {} job(s) could not be written (nightjar status shows them; "
          "nightjar results JOB --write writes them again)",
          summary->outputs_failed);
      return kExitFailure;
    }
    if (summary->failed > 0) {
      spdlog::error("{} item(s) failed for good during this run (nightjar status JOB lists them)",
                    summary->failed);
      return kExitItemsFailed;
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
