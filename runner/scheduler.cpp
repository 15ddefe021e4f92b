// The run loop: claims, model cache, outcomes, idle polling.
#include "runner/scheduler.h"

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/model/model.h"
#include "runner/lease_keeper.h"
#include "runner/lease_owner.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;

// The model of the current job, reopened only when a job names another one.
class ModelCache {
 public:
  Result<Model*> get(const JobRow& job) {
    if (model_ && dir_ == job.model_dir && memory_ == job.memory_bytes) return model_.get();
    model_.reset();
    auto t0 = Clock::now();
    ModelOptions options;
    // TODO(issue 4): pass job.memory_bytes once ModelOptions has the memory budget.
    NJ_ASSIGN_OR_RETURN(model_, Model::open(job.model_dir, options));
    dir_ = job.model_dir;
    memory_ = job.memory_bytes;
    spdlog::info("opened model {} in {:.2f} s", dir_, std::chrono::duration<double>(Clock::now() - t0).count());
    return model_.get();
  }

 private:
  std::unique_ptr<Model> model_;
  std::string dir_;
  std::optional<uint64_t> memory_;
};

// The item runner of the job's kind (generate so far); another kind is a failed attempt.
Result<ItemReport> run_claimed(const ItemEnv& env, const Claim& claim) {
  if (claim.job.kind == "generate") return run_item(env, claim);
  const std::string error = "this nightjar cannot run jobs of kind '" + claim.job.kind + "'";
  NJ_ASSIGN_OR_RETURN(auto state, env.store.fail_attempt(claim.item.id, env.owner,
                                                         Progress{claim.item.tokens_done, {}, 0, 0}, error));
  if (!state) return ItemReport{ItemOutcome::kLostLease, std::nullopt, "lease lost", 0};
  return ItemReport{ItemOutcome::kAttemptFailed, *state, error, 0};
}

// Sleeps up to `seconds`, waking early on a stop.
void idle_wait(double seconds, const StopControl& stop) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !stop.reason()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

Result<RunSummary> run_queue(const Home& home, JobStore& store, const SchedulerOptions& options,
                             const StopControl& stop, ProgressReporter& progress) {
  RunSummary summary;
  const std::string owner = this_lease_owner();
  LeaseKeeper keeper(home.db_path(), owner, options.lease_s);
  StateCheckpoints files(home.dir);
  ModelCache models;
  ItemRunOptions item_options = options.item;
  item_options.prefill_chunk = options.prefill_chunk;
  bool said_idle = false;
  const auto t_start = Clock::now();

  for (;;) {
    if (auto reason = stop.reason()) {
      summary.end_reason = *reason;
      break;
    }
    if (options.max_items && summary.done + summary.failed >= *options.max_items) {
      summary.end_reason = "--max-items " + std::to_string(*options.max_items);
      break;
    }
    NJ_ASSIGN_OR_RETURN(std::optional<Claim> claim, store.claim_next(owner, options.lease_s, lease_owner_alive));
    if (!claim) {
      if (options.drain) {
        summary.end_reason = "queue empty";
        break;
      }
      if (!said_idle) spdlog::info("nothing queued; waiting for work (--drain exits instead)");
      said_idle = true;
      idle_wait(options.poll_interval_s, stop);
      continue;
    }
    said_idle = false;
    const ItemRow& item = claim->item;
    spdlog::info("job {} '{}' item {}: {} ({} of {} tokens stored, {} failed attempts before)", claim->job.id,
                 claim->job.name, item.custom_id, item.tokens_done > 0 ? "resuming" : "starting", item.tokens_done,
                 item.max_tokens, item.attempts);
    keeper.start(item.id);
    auto model = models.get(claim->job);
    if (!model.ok()) {
      keeper.stop();
      NJ_ASSIGN_OR_RETURN(auto state, store.fail_attempt(item.id, owner, Progress{item.tokens_done, {}, 0, 0},
                                                         model.status().message()));
      spdlog::error("job {} item {}: {}", claim->job.id, item.custom_id, model.status().message());
      if (state == ItemState::kFailed) ++summary.failed;
      else ++summary.failed_attempts;
      continue;
    }
    ItemEnv env{store, **model, files, item_options, owner, stop, keeper, progress};
    auto t_item = Clock::now();
    auto report = run_claimed(env, *claim);
    keeper.stop();
    if (!report.ok()) return report.status();
    summary.tokens += report->tokens_generated;
    switch (report->outcome) {
      case ItemOutcome::kDone:
        ++summary.done;
        spdlog::info("job {} item {}: done ({} new tokens in {:.2f} s)", claim->job.id, item.custom_id,
                     report->tokens_generated, std::chrono::duration<double>(Clock::now() - t_item).count());
        break;
      case ItemOutcome::kStopped: ++summary.stopped; break;
      case ItemOutcome::kLostLease: break;
      case ItemOutcome::kAttemptFailed:
        if (report->state_after == ItemState::kFailed) ++summary.failed;
        else ++summary.failed_attempts;
        break;
    }
  }
  spdlog::info("run ended ({}): {} items done, {} failed, {} failed attempts; {} tokens in {:.1f} s",
               summary.end_reason, summary.done, summary.failed, summary.failed_attempts, summary.tokens,
               std::chrono::duration<double>(Clock::now() - t_start).count());
  return summary;
}

}  // namespace nj::runner
