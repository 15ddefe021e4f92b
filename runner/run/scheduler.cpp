// The run loop: claims, model cache, outcomes, idle polling.
#include "runner/run/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <list>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/plan/pass_cost.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/units.h"
#include "runner/report/job_outputs.h"
#include "runner/run/classify_runner.h"
#include "runner/run/lease_keeper.h"
#include "runner/run/lease_owner.h"
#include "runner/run/pass_group.h"
#include "runner/run/prefix_states.h"
#include "runner/store/job_kind.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

PlanOptions run_plan_options(bool classify, int64_t context, const SchedulerOptions& options) {
  PlanOptions o;
  o.prefill_chunk = options.prefill_chunk;
  o.max_context = static_cast<int>(std::max<int64_t>(1, context));
  // A generation's replay keeps a logits row per replayed token; a classification wants
  // only its last row's, keeps a second state (the one after its prompt) while it scores
  // labels that share tokens (classify_runner.cpp), and prefills its documents in windows.
  o.all_logits = !classify;
  o.windows = classify;
  o.sequence_states = classify ? 2 : 1;
  o.io_threads = options.io_threads;
  return o;
}

Result<int> run_draft_tokens(jobs::SpeculativeMode mode, const ModelLayout* layout, uint64_t memory,
                             PlanOptions po) {
  if (mode == jobs::SpeculativeMode::kOff) return 0;
  if (mode == jobs::SpeculativeMode::kNgram) return kRunDraftTokens;
  if (memory == 0 || !layout) return 0;  // resident: speculation_pays never holds
  po.draft_tokens = kRunDraftTokens;
  NJ_ASSIGN_OR_RETURN(ResidencyPlan plan, plan_residency(*layout, memory, po));
  return plan.draft_tokens > 0 && speculation_pays(pass_cost(*layout, plan), plan) ? kRunDraftTokens
                                                                                   : 0;
}

int run_batch(int requested, int max_batch, int64_t items) {
  if (requested > 0) return std::max(1, std::min(requested, max_batch));
  const int64_t fit = std::min<int64_t>({max_batch, kMaxDefaultBatch, std::max<int64_t>(1, items)});
  return static_cast<int>(std::max<int64_t>(1, fit));
}

int64_t items_for_batch(const std::vector<JobSummary>& jobs, const JobRow& job) {
  int64_t n = 0;
  for (const JobSummary& j : jobs)
    if (j.job.model_dir == job.model_dir && j.job.memory_bytes == job.memory_bytes &&
        j.job.kind == job.kind)
      n += j.queued + j.running;
  return n;
}

namespace {

// The model (and its tokenizer, when it has one) of the current job, reopened only when a
// job needs another model, another memory budget or a longer context than the plan holds.
class ModelCache {
 public:
  explicit ModelCache(const SchedulerOptions& options) : options_(options) {}

  // The model for `job`, planned for a batch: options.batch items, or when 0 the largest
  // batch the budget holds. REQUIRES: no Forward of the previous model is in use.
  // `items`: how many items could share its batches (items_for_batch).
  Result<Model*> get(const JobRow& job, int64_t context, int64_t items) {
    const uint64_t memory = job.memory_bytes.value_or(0);
    // The plan differs by kind (run_plan_options).
    const bool classify = is_classify(job);
    if (holds(job, context)) return model_.get();
    NJ_ASSIGN_OR_RETURN(const jobs::SpeculativeMode mode, stored_speculative_mode(job));
    model_.reset();
    tokenizer_.reset();
    auto t0 = Clock::now();
    ModelOptions options;
    options.memory_bytes = memory;
    options.plan = run_plan_options(classify, context, options_);
    options.streaming.io_threads = options_.io_threads;
    batch_ = options_.batch > 0
                 ? options_.batch
                 : static_cast<int>(std::clamp<int64_t>(items, 1, kDefaultResidentBatch));
    int drafts = 0;
    if (memory > 0) {
      std::string pack_warning;
      NJ_ASSIGN_OR_RETURN(ModelHeaders headers,
                          open_model_headers(job.model_dir, true, &pack_warning));
      NJ_ASSIGN_OR_RETURN(ResidencyPlan one, plan_residency(*headers.layout, memory, options.plan));
      batch_ = run_batch(options_.batch, one.max_batch, items);
      if (options_.batch > one.max_batch)
        spdlog::warn("--batch {}: the budget {} of job {} holds at most {}; running {} per pass",
                     options_.batch, format_bytes(memory), job.id, one.max_batch, batch_);
      options.plan.batch = batch_;
      NJ_ASSIGN_OR_RETURN(drafts,
                          run_draft_tokens(mode, headers.layout.get(), memory, options.plan));
    } else {
      NJ_ASSIGN_OR_RETURN(drafts, run_draft_tokens(mode, nullptr, 0, options.plan));
    }
    options.plan.batch = batch_;
    options.plan.draft_tokens = drafts;
    NJ_ASSIGN_OR_RETURN(model_, Model::open(job.model_dir, options));
    const ResidencyPlan& plan = model_->plan();
    speculation_ = BatchSpeculation{plan.draft_tokens, pass_cost(model_->layout(), plan)};
    spec_text_ = stored_speculative_text(job);
    if (mode == jobs::SpeculativeMode::kNgram && plan.draft_tokens < drafts)
      spdlog::warn(
          "job {} (speculative: ngram): the budget leaves room for {} drafted tokens per item "
          "and pass (asked for {}){}; drafts never take memory from the weights",
          job.id, plan.draft_tokens, drafts,
          plan.draft_tokens == 0 ? ", so its items decode plainly" : "");
    if (Tokenizer::exists_in(job.model_dir)) {
      NJ_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(job.model_dir));
      tokenizer_.emplace(std::move(tok));
    }
    dir_ = job.model_dir;
    memory_ = memory;
    context_ = context;
    classify_ = classify;
    spdlog::info(
        "opened model {} in {:.2f} s ({}, context {}, batch {}{}{})", dir_,
        std::chrono::duration<double>(Clock::now() - t0).count(),
        memory ? "budget " + format_bytes(memory) : std::string("all resident"), context, batch_,
        plan.draft_tokens > 0
            ? ", speculative: up to " + std::to_string(plan.draft_tokens) + " drafts per item"
            : std::string(),
        tokenizer_ ? ", with tokenizer" : "");
    return model_.get();
  }
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  int batch() const { return batch_; }
  int64_t context() const { return context_; }
  bool holds(const JobRow& job, int64_t context) const {
    return model_ && dir_ == job.model_dir && memory_ == job.memory_bytes.value_or(0) &&
           context_ >= context && classify_ == is_classify(job) &&
           spec_text_ == stored_speculative_text(job);
  }
  // What the plan allows speculation (the jobs of a batch share its `speculative:`).
  const BatchSpeculation& speculation() const { return speculation_; }
  const std::string& speculative_text() const { return spec_text_; }

 private:
  const SchedulerOptions& options_;
  std::unique_ptr<Model> model_;
  std::optional<Tokenizer> tokenizer_;
  std::string dir_;
  uint64_t memory_ = 0;
  int64_t context_ = 0;
  bool classify_ = false;  // planned for a classification (windows, last logits only)
  int batch_ = 1;
  std::string spec_text_;  // the `speculative:` of the jobs it was planned for
  BatchSpeculation speculation_;
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
Result<AttemptReport> run_claimed(const ItemEnv& env, const Claim& claim) {
  const std::optional<jobs::JobKind> kind = known_job_kind(claim.job.kind);
  if (kind == jobs::JobKind::kGenerate) return run_item(env, claim);
  if (kind == jobs::JobKind::kClassify) return run_classify_item(env, claim);
  const std::string error = "this nightjar cannot run jobs of kind '" + claim.job.kind + "'";
  NJ_ASSIGN_OR_RETURN(auto state,
                      env.store.fail_attempt(claim.item.id, env.owner,
                                             Progress{claim.item.tokens_done, {}, 0, 0}, error));
  if (!state) return AttemptReport{ItemOutcome::kLostLease, std::nullopt, "lease lost", 0};
  return AttemptReport{ItemOutcome::kAttemptFailed, *state, error, 0};
}

// After an item of `job` finished (done or failed for good): when the job has nothing queued
// or running left, writes the outputs its spec declares and drops its prefix state. Returns
// false when an output could not be written: that is logged and recorded with the job
// (outputs_state "failed", shown by status, report and results); the results stay in the
// store (`nightjar results JOB --write` writes them again). Status only for store failures.
Result<bool> finish_job_if_complete(JobStore& store, const JobRow& job, const Home& home) {
  NJ_ASSIGN_OR_RETURN(JobSummary summary, store.job_summary(job.id));
  if (summary.queued + summary.running > 0) return true;
  PrefixStates(home.dir).remove_job(job.id);
  auto written = write_declared_outputs(store, job, home);
  if (!written.ok()) {
    spdlog::error("job {}: could not write its outputs: {}", job.id, written.status().message());
    NJ_RETURN_IF_ERROR(store.record_outputs(job.id, {}, written.status().message()));
    return false;
  }
  if (written->empty()) return true;
  for (const auto& path : *written) spdlog::info("job {}: wrote {}", job.id, path);
  NJ_RETURN_IF_ERROR(store.record_outputs(job.id, *written, std::nullopt));
  return true;
}

// The wait before the next attempt of an item whose model could not be opened, after
// `attempts` failed attempts before this one.
double retry_wait_s(const SchedulerOptions& options, int attempts) {
  return std::min(kMaxRetryWait_s, options.retry_s * std::pow(2.0, std::min(attempts, 30)));
}

// The run fails while it holds `item`'s lease: gives the item back (queued, attempts
// unchanged), best effort: when the store cannot take even that, the next run reclaims the
// lease as it would after a crash, and the log says so.
void release_after_failure(JobStore& store, const std::string& owner, const ItemRow& item,
                           const Status& failure) {
  auto released = store.release_lease(item.id, owner, "run failed: " + failure.message());
  if (!released.ok())
    spdlog::error(
        "could not release the lease of item {} ({}); the next run takes it over as "
        "from a process that died",
        item.custom_id, released.status().message());
  else if (*released)
    spdlog::info("released item {}: it is queued again, its attempts unchanged", item.custom_id);
}

// Sleeps up to `seconds`, waking early on a stop.
void idle_wait(double seconds, const StopControl& stop) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !stop.reason())
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

namespace {

// An item this process holds: its claim, its lease, and once its thread is done its report.
struct Held {
  Claim claim;
  std::unique_ptr<ItemLease> lease;
  Clock::time_point started = Clock::now();
  std::optional<Result<AttemptReport>> report;  // set when its thread is done
};

}  // namespace

Result<RunSummary> run_queue(const Home& home, JobStore& store, const SchedulerOptions& options,
                             StopControl& stop, ProgressReporter& progress) {
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
  // The batch: the model's Forward, the group whose passes it runs, the items in it.
  // Declared in this order so that the group (its threads) goes before the Forward.
  std::unique_ptr<Forward> forward;
  Model* batch_model = nullptr;  // the model `forward` computes with
  std::unique_ptr<PassGroup> group;
  std::list<Held> held;
  PrefixGate prefix_gate;
  Status fatal;

  // The run itself failed (the store, a full disk, a thread refused): every item of the batch
  // stops as on SIGTERM (checkpoint, commit, lease given back), and the run returns `st`.
  auto fail_run = [&](const Status& st) {
    if (fatal.ok()) fatal = st;
    stop.request("run failed: " + st.message());
  };

  // Records what a finished item did; a job one of its items ended goes into `ended` (its
  // outputs are written once per round, after every finished item is settled: items of one
  // job may end in the same round). Status only for store failures.
  std::map<int64_t, JobRow> ended;
  auto settle = [&](Held& h) -> Status {
    keeper.remove(h.claim.item.id);
    if (!h.report->ok()) {
      release_after_failure(store, owner, h.claim.item, h.report->status());
      return h.report->status();
    }
    const AttemptReport& report = **h.report;
    summary.tokens += report.tokens_generated;
    summary.speculation.add(report.speculation);
    if (report.state_after == ItemState::kDone || report.state_after == ItemState::kFailed)
      ended.emplace(h.claim.job.id, h.claim.job);
    switch (report.outcome) {
      case ItemOutcome::kDone:
        ++summary.done;
        spdlog::info("job {} item {}: done ({} new tokens in {:.2f} s)", h.claim.job.id,
                     h.claim.item.custom_id, report.tokens_generated,
                     std::chrono::duration<double>(Clock::now() - h.started).count());
        break;
      case ItemOutcome::kStopped:
        ++summary.stopped;
        break;
      case ItemOutcome::kLostLease:
        break;
      case ItemOutcome::kAttemptFailed:
        if (report.state_after == ItemState::kFailed)
          ++summary.failed;
        else
          ++summary.failed_attempts;
        break;
    }
    return Status();
  };

  for (;;) {
    // 1. Fill the batch: items of the batch's model (any model when it is empty).
    auto may_claim = [&] {
      const int64_t counted = summary.done + summary.failed + static_cast<int64_t>(held.size());
      return fatal.ok() && !stop.reason() &&
             !(options.max_items && counted >= *options.max_items) &&
             (held.empty() || static_cast<int>(held.size()) < models.batch());
    };
    while (may_claim()) {
      ClaimFilter filter;
      for (const Held& h : held) filter.held.insert(h.claim.item.id);
      if (!held.empty())
        filter.model = ClaimFilter::Model{
            held.front().claim.job.model_dir, held.front().claim.job.memory_bytes.value_or(0),
            models.context(), held.front().claim.job.kind, models.speculative_text()};
      NJ_ASSIGN_OR_RETURN(std::optional<Claim> claim,
                          store.claim_next(owner, options.lease_s, alive, filter));
      if (!claim) break;
      said_idle = false;
      const ItemRow& item = claim->item;
      spdlog::info("job {} '{}' item {}: {} ({} of {} tokens stored, {} failed attempts before)",
                   claim->job.id, claim->job.name, item.custom_id,
                   item.tokens_done > 0 ? "resuming" : "starting", item.tokens_done,
                   item.max_tokens, item.attempts);
      if (Status st = keeper.add(item.id); !st.ok()) {
        release_after_failure(store, owner, item, st);
        fail_run(st);
        break;
      }
      const int64_t context = job_context(*claim);
      if (held.empty() && !models.holds(claim->job, context)) {
        if (group) summary.passes.add(group->totals());
        group.reset();
        forward.reset();
      }
      if (!group) {
        auto jobs = store.list_jobs();
        auto model = jobs.ok() ? models.get(claim->job, context, items_for_batch(*jobs, claim->job))
                               : Result<Model*>(jobs.status());
        if (!model.ok()) {
          keeper.remove(item.id);
          const double wait_s = retry_wait_s(options, item.attempts);
          auto state = store.fail_attempt(item.id, owner, Progress{item.tokens_done, {}, 0, 0},
                                          model.status().message(), /*final=*/false, wait_s);
          if (!state.ok()) {
            release_after_failure(store, owner, item, state.status());
            fail_run(state.status());
            break;
          }
          spdlog::error("job {} item {}: {}", claim->job.id, item.custom_id,
                        model.status().message());
          if (*state == ItemState::kFailed) {
            ++summary.failed;
            auto outputs_ok = finish_job_if_complete(store, claim->job, home);
            if (!outputs_ok.ok()) {
              fail_run(outputs_ok.status());
              break;
            }
            if (!*outputs_ok) ++summary.outputs_failed;
          } else if (*state == ItemState::kQueued) {
            ++summary.failed_attempts;
            spdlog::info("job {} item {}: next attempt in {}", claim->job.id, item.custom_id,
                         format_duration(wait_s));
          }
          continue;
        }
        // The activations of the plan: with drafts, a pass holds 1 + draft_tokens rows of
        // every item (tentative steps) beside the prefill chunks.
        PlanOptions po = (*model)->plan_options();
        po.draft_tokens = (*model)->plan().draft_tokens;
        const ActivationShape shape = planned_activation_shape(po);
        ForwardOptions fo{shape.rows, po.batch, po.max_context, false};
        if (po.draft_tokens > 0) {
          fo.tentative_rows = 1 + po.draft_tokens;
          fo.tentative_sequences = po.batch;
          fo.kda_rollback = po.kda_rollback;
        }
        batch_model = *model;
        forward = std::make_unique<Forward>(batch_model->config(), batch_model->weights(), fo);
        group = std::make_unique<PassGroup>(*forward, shape.rows);
      }
      held.push_back(Held{std::move(*claim), nullptr, Clock::now(), std::nullopt});
      Held& h = held.back();
      h.lease = std::make_unique<ItemLease>(keeper, h.claim.item.id);
      Model& model = *batch_model;
      const Tokenizer* tokenizer = models.tokenizer();
      group->spawn([&, &h = h, &model = model, tokenizer, speculation = models.speculation()] {
        ItemEnv env{store, model,    tokenizer, files,       item_options, owner,
                    stop,  *h.lease, *group,    prefix_gate, progress,     speculation};
        h.report = run_claimed(env, h.claim);
      });
    }

    // 2. Nothing held: end, or wait for work.
    if (held.empty()) {
      if (!fatal.ok()) return fatal;
      if (auto reason = stop.reason()) {
        summary.end_reason = *reason;
        break;
      }
      if (options.max_items && summary.done + summary.failed >= *options.max_items) {
        summary.end_reason = "--max-items " + std::to_string(*options.max_items);
        break;
      }
      NJ_ASSIGN_OR_RETURN(std::optional<double> retry_at, store.next_retry_at());
      if (options.drain && retry_at) {  // queued, waiting out a backoff: not empty yet
        idle_wait(std::min(options.poll_interval_s, *retry_at - store.now()), stop);
        continue;
      }
      if (options.drain) {
        summary.end_reason = "queue empty";
        break;
      }
      if (!said_idle) spdlog::info("nothing queued; waiting for work (--drain exits instead)");
      said_idle = true;
      idle_wait(options.poll_interval_s, stop);
      continue;
    }

    // 3. Let every item run up to its next pass (or its end); settle the finished ones.
    group->wait_for_members();
    bool freed = false;
    for (auto it = held.begin(); it != held.end();) {
      if (!it->report) {
        ++it;
        continue;
      }
      if (Status st = settle(*it); !st.ok()) fail_run(st);
      it = held.erase(it);
      freed = true;
    }
    for (const auto& [id, job] : ended) {
      auto outputs_ok = finish_job_if_complete(store, job, home);
      if (!outputs_ok.ok())
        fail_run(outputs_ok.status());
      else if (!*outputs_ok)
        ++summary.outputs_failed;
    }
    ended.clear();
    // 4. One pass for the items waiting; a place that just freed is filled first, so that
    // the next item's prompt joins this pass.
    if (freed && may_claim()) continue;
    if (group->anyone_waiting()) group->run_pass();
  }
  if (group) summary.passes.add(group->totals());
  group.reset();
  forward.reset();
  // The run's totals, which its items' engine shares add up to (`nightjar report`).
  const PassTotals& t = summary.passes;
  NJ_RETURN_IF_ERROR(store.add_event(
      std::nullopt, std::nullopt, "run_ended",
      nlohmann::json{{"reason", summary.end_reason},
                     {"done", summary.done},
                     {"failed", summary.failed},
                     {"tokens", summary.tokens},
                     {"passes", t.passes},
                     {"rows", t.rows},
                     {"bytes_read", static_cast<uint64_t>(std::llround(t.bytes_read))},
                     {"compute_s", t.compute_s},
                     {"io_wait_s", t.wait_s},
                     {"max_batch", t.max_sequences},
                     {"speculation",
                      {{"passes", summary.speculation.passes},
                       {"drafted", summary.speculation.drafted},
                       {"accepted", summary.speculation.accepted}}},
                     {"seconds", std::chrono::duration<double>(Clock::now() - t_start).count()}}
          .dump()));
  spdlog::info(
      "run ended ({}): {} items done, {} failed, {} failed attempts; {} tokens in {:.1f} s; up to "
      "{} items per pass{}{}",
      summary.end_reason, summary.done, summary.failed, summary.failed_attempts, summary.tokens,
      std::chrono::duration<double>(Clock::now() - t_start).count(), summary.passes.max_sequences,
      summary.speculation.passes
          ? fmt::format("; speculation: {} passes, {} drafted, {} accepted",
                        summary.speculation.passes, summary.speculation.drafted,
                        summary.speculation.accepted)
          : std::string(),
      summary.outputs_failed ? "; the outputs of " + std::to_string(summary.outputs_failed) +
                                   " job(s) could not be written"
                             : std::string());
  return summary;
}

}  // namespace nj::runner
