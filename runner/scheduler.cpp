// The run loop: claims, model cache, outcomes, idle polling.
#include "runner/scheduler.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/units.h"
#include "runner/classify_runner.h"
#include "runner/job_outputs.h"
#include "runner/lease_keeper.h"
#include "runner/lease_owner.h"
#include "runner/prefix_states.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;

// The model (and its tokenizer, when it has one) of the current job, reopened only when a
// job needs another model, another memory budget or a longer context than the plan holds.
class ModelCache {
 public:
  explicit ModelCache(const SchedulerOptions& options) : options_(options) {}

  Result<Model*> get(const JobRow& job, int64_t context) {
    const uint64_t memory = job.memory_bytes.value_or(0);
    // A classification keeps a second state (the one after its prompt) while it scores
    // labels that share tokens (classify_runner.cpp); the budget must hold both.
    const int states = job.kind == "classify" ? 2 : 1;
    if (model_ && dir_ == job.model_dir && memory_ == memory && context_ >= context &&
        states_ >= states)
      return model_.get();
    model_.reset();
    tokenizer_.reset();
    auto t0 = Clock::now();
    ModelOptions options;
    options.memory_bytes = memory;
    options.plan.prefill_chunk = options_.prefill_chunk;
    options.plan.max_context = static_cast<int>(std::max<int64_t>(1, context));
    options.plan.all_logits = true;  // the replay keeps a logits row per replayed token
    options.plan.sequence_states = states;
    options.streaming.io_threads = options_.io_threads;
    NJ_ASSIGN_OR_RETURN(model_, Model::open(job.model_dir, options));
    if (Tokenizer::exists_in(job.model_dir)) {
      NJ_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(job.model_dir));
      tokenizer_.emplace(std::move(tok));
    }
    dir_ = job.model_dir;
    memory_ = memory;
    context_ = context;
    states_ = states;
    spdlog::info("opened model {} in {:.2f} s ({}, context {}{})", dir_,
                 std::chrono::duration<double>(Clock::now() - t0).count(),
                 memory ? "budget " + format_bytes(memory) : std::string("all resident"), context,
                 tokenizer_ ? ", with tokenizer" : "");
    return model_.get();
  }
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }

 private:
  const SchedulerOptions& options_;
  std::unique_ptr<Model> model_;
  std::optional<Tokenizer> tokenizer_;
  std::string dir_;
  uint64_t memory_ = 0;
  int64_t context_ = 0;
  int states_ = 0;
};

// The longest sequence of the claimed item's job (recorded at submit), at least the item's.
int64_t job_context(const Claim& claim) {
  int64_t context = static_cast<int64_t>(claim.item.prompt_ids.size()) + claim.item.max_tokens;
  auto settings = nlohmann::json::parse(claim.job.settings_json, nullptr, false);
  if (settings.is_object() && settings.contains("max_context") &&
      settings["max_context"].is_number_integer())
    context = std::max(context, settings["max_context"].get<int64_t>());
  return context;
}

// The item runner of the job's kind; another kind is a failed attempt.
Result<ItemReport> run_claimed(const ItemEnv& env, const Claim& claim) {
  if (claim.job.kind == "generate") return run_item(env, claim);
  if (claim.job.kind == "classify") return run_classify_item(env, claim);
  const std::string error = "this nightjar cannot run jobs of kind '" + claim.job.kind + "'";
  NJ_ASSIGN_OR_RETURN(auto state,
                      env.store.fail_attempt(claim.item.id, env.owner,
                                             Progress{claim.item.tokens_done, {}, 0, 0}, error));
  if (!state) return ItemReport{ItemOutcome::kLostLease, std::nullopt, "lease lost", 0};
  return ItemReport{ItemOutcome::kAttemptFailed, *state, error, 0};
}

// After an item of `job` finished (done or failed for good): when the job has nothing queued
// or running left, writes the outputs its spec declares and drops its prefix state. An
// output that cannot be written is logged and recorded as an event; the results stay in the
// store (`nightjar results JOB --write` writes them again). Status only for store failures.
Status finish_job_if_complete(JobStore& store, const JobRow& job, const Home& home) {
  NJ_ASSIGN_OR_RETURN(JobSummary summary, store.job_summary(job.id));
  if (summary.queued + summary.running > 0) return Status();
  PrefixStates(home.dir).remove_job(job.id);
  auto written = write_declared_outputs(store, job, home);
  if (!written.ok()) {
    spdlog::error("job {}: could not write its outputs: {}", job.id, written.status().message());
    return store.add_event(job.id, std::nullopt, "outputs_failed",
                           nlohmann::json{{"error", written.status().message()}}.dump());
  }
  if (written->empty()) return Status();
  for (const auto& path : *written) spdlog::info("job {}: wrote {}", job.id, path);
  return store.add_event(job.id, std::nullopt, "outputs_written",
                         nlohmann::json{{"paths", *written}}.dump());
}

// Sleeps up to `seconds`, waking early on a stop.
void idle_wait(double seconds, const StopControl& stop) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !stop.reason())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

Result<RunSummary> run_queue(const Home& home, JobStore& store, const SchedulerOptions& options,
                             const StopControl& stop, ProgressReporter& progress) {
  RunSummary summary;
  const std::string owner = this_lease_owner();
  LeaseKeeper keeper(home.db_path(), owner, options.lease_s);
  StateCheckpoints files(home.dir);
  ModelCache models(options);
  ItemRunOptions item_options = options.item;
  item_options.prefill_chunk = options.prefill_chunk;
  bool said_idle = false;
  const auto t_start = Clock::now();
  const OwnerAliveFn alive =
      options.exclusive ? OwnerAliveFn([&owner](const std::string& o) { return o == owner; })
                        : OwnerAliveFn(lease_owner_alive);

  for (;;) {
    if (auto reason = stop.reason()) {
      summary.end_reason = *reason;
      break;
    }
    if (options.max_items && summary.done + summary.failed >= *options.max_items) {
      summary.end_reason = "--max-items " + std::to_string(*options.max_items);
      break;
    }
    NJ_ASSIGN_OR_RETURN(std::optional<Claim> claim,
                        store.claim_next(owner, options.lease_s, alive));
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
    spdlog::info("job {} '{}' item {}: {} ({} of {} tokens stored, {} failed attempts before)",
                 claim->job.id, claim->job.name, item.custom_id,
                 item.tokens_done > 0 ? "resuming" : "starting", item.tokens_done, item.max_tokens,
                 item.attempts);
    keeper.start(item.id);
    auto model = models.get(claim->job, job_context(*claim));
    if (!model.ok()) {
      keeper.stop();
      NJ_ASSIGN_OR_RETURN(auto state,
                          store.fail_attempt(item.id, owner, Progress{item.tokens_done, {}, 0, 0},
                                             model.status().message()));
      spdlog::error("job {} item {}: {}", claim->job.id, item.custom_id, model.status().message());
      if (state == ItemState::kFailed) {
        ++summary.failed;
        NJ_RETURN_IF_ERROR(finish_job_if_complete(store, claim->job, home));
      } else {
        ++summary.failed_attempts;
      }
      continue;
    }
    ItemEnv env{store,  **model, models.tokenizer(), files, item_options, owner, stop,
                keeper, progress};
    auto t_item = Clock::now();
    auto report = run_claimed(env, *claim);
    keeper.stop();
    if (!report.ok()) return report.status();
    summary.tokens += report->tokens_generated;
    if (report->state_after == ItemState::kDone || report->state_after == ItemState::kFailed)
      NJ_RETURN_IF_ERROR(finish_job_if_complete(store, claim->job, home));
    switch (report->outcome) {
      case ItemOutcome::kDone:
        ++summary.done;
        spdlog::info("job {} item {}: done ({} new tokens in {:.2f} s)", claim->job.id,
                     item.custom_id, report->tokens_generated,
                     std::chrono::duration<double>(Clock::now() - t_item).count());
        break;
      case ItemOutcome::kStopped:
        ++summary.stopped;
        break;
      case ItemOutcome::kLostLease:
        break;
      case ItemOutcome::kAttemptFailed:
        if (report->state_after == ItemState::kFailed)
          ++summary.failed;
        else
          ++summary.failed_attempts;
        break;
    }
  }
  spdlog::info(
      "run ended ({}): {} items done, {} failed, {} failed attempts; {} tokens in {:.1f} s",
      summary.end_reason, summary.done, summary.failed, summary.failed_attempts, summary.tokens,
      std::chrono::duration<double>(Clock::now() - t_start).count());
  return summary;
}

}  // namespace nj::runner
