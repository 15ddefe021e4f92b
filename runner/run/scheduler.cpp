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

#include "engine/io/sysinfo.h"
#include "engine/runtime/model.h"
#include "engine/plan/pass_cost.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/units.h"
#include "runner/results/job_outputs.h"
#include "runner/item/classify_runner.h"
#include "runner/durable/lease_keeper.h"
#include "runner/durable/lease_owner.h"
#include "runner/item/pass_group.h"
#include "runner/durable/prefix_states.h"
#include "runner/durable/sweep_boundaries.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_label.h"
#include "runner/store/job_settings.h"
#include "jobs/spec/label_trie.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;

// "job 3 (triage), job 5 (news)".
std::string job_labels(const std::vector<std::pair<int64_t, std::string>>& jobs) {
  std::string out;
  for (const auto& [id, name] : jobs) out += (out.empty() ? "" : ", ") + job_label(id, name);
  return out;
}

// "1 item", "3 items".
std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kAuto: return "auto";
    case Schedule::kSweep: return "sweep";
    case Schedule::kPasses: return "passes";
  }
  return "?";
}

Result<Schedule> parse_schedule(const std::string& name) {
  for (Schedule s : {Schedule::kAuto, Schedule::kSweep, Schedule::kPasses})
    if (name == schedule_name(s)) return s;
  return invalid_argument("unknown schedule '" + name + "' (known: auto, sweep, passes)");
}

Result<std::optional<SweepDecision>> decide_sweep(const ModelLayout& layout,
                                                  const ModelRequest& request,
                                                  const SweepWork& work, Schedule schedule) {
  if (!request.classify || schedule == Schedule::kPasses) return std::optional<SweepDecision>();
  PlanOptions base =
      plan_options_for(true, request.context, request.prefill_chunk, request.io_threads);
  base.bandwidth_gbps = request.bandwidth_gbps;
  auto window = plan_sweep_window(layout, request.memory_bytes, work, base);
  if (!window.ok()) {
    if (schedule == Schedule::kSweep) return window.status();
    return std::optional<SweepDecision>();  // passes may still fit: they hold less per document
  }
  // run plans every classify job's passes first (plan_model, before the sweep), so a job runs
  // in no less than their minimum for one document, however little a sweep needs.
  window->min_memory_bytes =
      std::max(window->min_memory_bytes, min_memory_for_batch(layout, base, 1));
  const int documents =
      request.batch > 0 ? std::min(request.batch, window->documents) : window->documents;
  if (schedule == Schedule::kAuto && documents <= 1) return std::optional<SweepDecision>();
  const int most = static_cast<int>(std::min<int64_t>(work.documents, 1 << 20));
  const int max_documents = std::max(documents, request.batch > 0 ? request.batch : most);
  return std::optional<SweepDecision>(SweepDecision{std::move(*window), documents, max_documents});
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
  // `items`: how many items could share its batches (items_for_batch). On failure
  // `*permanent` says whether another attempt would fail the same way: the job's settings or
  // its plan (a budget below the minimum) are, a model that cannot be opened is not (a disk
  // not mounted yet, a model being copied).
  Result<Model*> get(const JobRow& job, int64_t context, int64_t items, int64_t longest_prompt,
                     bool* permanent) {
    *permanent = false;
    if (holds(job, context)) return model_.get();
    *permanent = true;
    NJ_ASSIGN_OR_RETURN(const jobs::SpeculativeMode mode, stored_speculative_mode(job));
    *permanent = false;
    model_.reset();
    tokenizer_.reset();
    auto t0 = Clock::now();
    const uint64_t memory = job.memory_bytes.value_or(0);
    const bool classify = is_classify(job);
    std::string pack_warning;
    NJ_ASSIGN_OR_RETURN(ModelHeaders headers,
                        open_model_headers(job.model_dir, true, &pack_warning));
    if (!pack_warning.empty()) spdlog::warn("not using the packed trunk: {}", pack_warning);
    // Every decision about the batch and the budget, once (engine/runtime/model_plan.h).
    ModelRequest request;
    request.memory_bytes = memory;
    request.classify = classify;
    request.context = context;
    request.batch = options_.batch;
    request.items = items;
    request.speculation = mode == jobs::SpeculativeMode::kOff     ? Speculation::kOff
                          : mode == jobs::SpeculativeMode::kNgram ? Speculation::kNgram
                                                                  : Speculation::kAuto;
    request.prefill_chunk = options_.prefill_chunk;
    request.io_threads = options_.io_threads;
    if (memory == 0) request.free_memory_bytes = free_memory_bytes();
    // A generation's prompts go through layer sweeps unless --schedule passes (plan_model
    // keeps them in passes when the weights do not stream or the window does not fit).
    if (!classify && options_.schedule != Schedule::kPasses) request.prompt_sweep_rows = longest_prompt;
    *permanent = true;  // the plan depends on nothing but the job and the model's headers
    NJ_ASSIGN_OR_RETURN(ModelPlan plan, plan_model(*headers.layout, request));
    sweep_ = false;
    if (classify && options_.schedule != Schedule::kPasses) {
      NJ_ASSIGN_OR_RETURN(std::optional<ModelPlan> swept, sweep_plan(job, *headers.layout, request));
      if (swept) {
        plan = std::move(*swept);
        sweep_ = true;
      }
    }
    *permanent = false;
    batch_ = plan.batch;
    if (memory > 0 && options_.batch > plan.max_batch)
      spdlog::warn("--batch {}: the budget {} of {} holds at most {}; running {} per pass",
                   options_.batch, format_bytes(memory), job_label(job), plan.max_batch, batch_);
    else if (memory == 0 && !sweep_ && options_.batch > batch_)
      spdlog::warn("--batch {}: {} has no memory: budget, and with every weight resident "
                   "the memory free now ({}) holds at most {}; running {} per pass",
                   options_.batch, job_label(job), format_bytes(request.free_memory_bytes), plan.max_batch,
                   batch_);
    StreamingOptions streaming;
    streaming.io_threads = options_.io_threads;
    NJ_ASSIGN_OR_RETURN(model_, Model::open(job.model_dir, std::move(headers), plan, memory, streaming));
    load_bytes_ += weight_bytes_read(model_->weights().stats());
    const ResidencyPlan& residency = model_->plan();
    speculation_ = BatchSpeculation{residency.draft_tokens, plan.pass_cost};
    spec_text_ = stored_speculative_text(job);
    if (mode == jobs::SpeculativeMode::kNgram && residency.draft_tokens < plan.asked_draft_tokens)
      spdlog::warn(
          "{} (speculative: ngram): the budget leaves room for {} drafted tokens per item "
          "and pass (asked for {}){}; drafts never take memory from the weights",
          job_label(job), residency.draft_tokens, plan.asked_draft_tokens,
          residency.draft_tokens == 0 ? ", so its items decode plainly" : "");
    if (Tokenizer::exists_in(job.model_dir)) {
      NJ_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(job.model_dir));
      tokenizer_.emplace(std::move(tok));
    }
    dir_ = job.model_dir;
    memory_ = memory;
    context_ = context;
    classify_ = classify;
    spdlog::info(
        "opened model {} in {:.2f} s ({}, context {}, {} {}{}{})", dir_,
        std::chrono::duration<double>(Clock::now() - t0).count(),
        memory ? "budget " + format_bytes(memory) : std::string("all resident"), context,
        sweep_ ? "layer sweeps of up to" : "batch", batch_,
        residency.draft_tokens > 0
            ? ", speculative: up to " + std::to_string(residency.draft_tokens) + " drafts per item"
            : std::string(),
        tokenizer_ ? ", with tokenizer" : "");
    return model_.get();
  }
  // Whether the current model's classify items are scored by layer sweeps.
  bool sweep() const { return sweep_; }
  // An empty window of the sweeps' plan, to fill with the documents claimed (sweep() only).
  SweepWindowFill window_fill() const {
    return SweepWindowFill(model_->config(), window_.work, window_.bytes, batch_);
  }
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  // Weight bytes the models this run opened read as they opened (not in any pass's reads).
  uint64_t load_bytes() const { return load_bytes_; }
  int batch() const { return batch_; }
  int64_t context() const { return context_; }
  bool holds(const JobRow& job, int64_t context) const {
    return model_ && dir_ == job.model_dir && memory_ == job.memory_bytes.value_or(0) &&
           context_ >= context && classify_ == is_classify(job) &&
           spec_text_ == stored_speculative_text(job) && (!sweep_ || window_.job_id == job.id);
  }
  // What the plan allows speculation (the jobs of a batch share its `speculative:`).
  const BatchSpeculation& speculation() const { return speculation_; }
  const std::string& speculative_text() const { return spec_text_; }

 private:
  // The plan of a classify job's layer sweeps (engine/plan/sweep_plan.h): its window is the
  // batch, filled by its documents' rows (fill_). nullopt when the schedule is auto and a
  // window would hold one document.
  Result<std::optional<ModelPlan>> sweep_plan(const JobRow& job, const ModelLayout& layout,
                                              const ModelRequest& request) {
    NJ_ASSIGN_OR_RETURN(jobs::ClassifySettings c, JobSettings::of(job).classify());
    NJ_ASSIGN_OR_RETURN(jobs::LabelTrie trie, jobs::LabelTrie::build(c.label_ids, c.labels));
    SweepWork work;
    work.documents = std::max<int64_t>(1, request.items);
    work.start_rows = static_cast<int64_t>(c.prefix_ids.size());
    work.prefix_passes = !options_.item.prefix_reuse && work.start_rows > 0;
    for (const auto& path : trie.feed_paths()) {
      work.branch_rows += static_cast<int64_t>(path.size());
      ++work.branches;
    }
    // The job's context is its prefix, its longest document and its longest label (submit).
    int64_t longest_label = 0;
    for (const auto& ids : c.label_ids) longest_label = std::max<int64_t>(longest_label, static_cast<int64_t>(ids.size()));
    work.document_rows = std::max<int64_t>(1, request.context - work.start_rows - longest_label);
    work.logits_rows = 1 + static_cast<int>(work.branch_rows);
    NJ_ASSIGN_OR_RETURN(std::optional<SweepDecision> sweep,
                        decide_sweep(layout, request, work, options_.schedule));
    if (!sweep) return std::optional<ModelPlan>();
    ModelPlan plan;
    plan.options = sweep->window.options;
    plan.residency = sweep->window.residency;
    plan.batch = sweep->max_documents;
    plan.requested_batch = options_.batch;
    plan.max_batch = sweep->max_documents;
    window_ = SweepWindow{work, sweep->window.window_bytes, job.id};
    plan.pass_cost = pass_cost(layout, plan.residency);
    return std::optional<ModelPlan>(std::move(plan));
  }

  const SchedulerOptions& options_;
  std::unique_ptr<Model> model_;
  std::optional<Tokenizer> tokenizer_;
  std::string dir_;
  uint64_t memory_ = 0;
  uint64_t load_bytes_ = 0;  // read by the models opened, as they opened (pinned and held units)
  int64_t context_ = 0;
  bool classify_ = false;  // planned for a classification (windows, last logits only)
  int batch_ = 1;
  bool sweep_ = false;  // classify items go through layer sweeps of up to batch_ documents
  struct SweepWindow {
    SweepWork work;        // what each document brings
    uint64_t bytes = 0;    // what a window may take (SweepWindowPlan::window_bytes)
    int64_t job_id = 0;    // the job whose documents they are (a window holds one job's)
  } window_;               // sweeps: how their windows fill
  std::string spec_text_;  // the `speculative:` of the jobs it was planned for
  BatchSpeculation speculation_;
};

// The longest sequence of the claimed item's job (recorded at submit), at least the item's.
int64_t job_context(const Claim& claim) {
  int64_t context = static_cast<int64_t>(claim.item.prompt_ids.size()) + claim.item.max_tokens;
  if (auto max_context = JobSettings::of(claim.job).max_context())
    context = std::max(context, *max_context);
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
  SweepBoundaries::remove_job(*Env::posix(), home.dir, job.id);
  auto written = write_declared_outputs(store, job, home);
  if (!written.ok()) {
    spdlog::error("{}: could not write its outputs: {}", job_label(job),
                  written.status().message());
    NJ_RETURN_IF_ERROR(store.record_outputs(job.id, {}, written.status().message()));
    return false;
  }
  if (written->empty()) return true;
  for (const auto& path : *written) spdlog::info("{}: wrote {}", job_label(job), path);
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
void release_after_failure(JobStore& store, const std::string& owner, const JobRow& job,
                           const ItemRow& item, const Status& failure) {
  auto released = store.release_lease(item.id, owner, "run failed: " + failure.message());
  if (!released.ok())
    spdlog::error(
        "{} item {}: could not release its lease ({}); the next run takes it over as "
        "from a process that died",
        job_label(job), item.custom_id, released.status().message());
  else if (*released)
    spdlog::info("{} item {}: released; it is queued again, its attempts unchanged",
                 job_label(job), item.custom_id);
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

namespace {

// One `run`: the loop of run_queue, in its steps. The batch is the model's Forward, the
// group whose passes it runs, and the items in it; members are declared in this order so
// that the group (its threads) goes before the Forward.
class QueueRun {
 public:
  QueueRun(const Home& home, JobStore& store, const SchedulerOptions& options, StopControl& stop,
           ProgressReporter& progress)
      : home_(home),
        store_(store),
        options_(options),
        stop_(stop),
        progress_(progress),
        owner_(this_lease_owner()),
        keeper_(home.db_path(), owner_, options.lease_s),
        files_(home.dir),
        models_(options),
        alive_(options.exclusive
                   ? OwnerAliveFn([this](const std::string& o) { return o == owner_; })
                   : OwnerAliveFn(lease_owner_alive)) {
    item_options_ = options.item;
    item_options_.prefill_chunk = options.prefill_chunk;
  }

  Result<RunSummary> run() {
    NJ_RETURN_IF_ERROR(finish_unwritten_outputs());
    for (;;) {
      // 1. Fill the batch: items of the batch's model (any model when it is empty).
      NJ_RETURN_IF_ERROR(fill_batch());
      // 2. Nothing held: end, or wait for work.
      if (held_.empty()) {
        NJ_ASSIGN_OR_RETURN(const bool end, idle());
        if (end) break;
        continue;
      }
      // 3. Let every item run up to its next pass (or its end); settle the finished ones.
      const bool freed = settle_finished();
      // 4. One pass for the items waiting; a place that just freed is filled first, so that
      // the next item's prompt joins this pass.
      if (freed && may_claim()) continue;
      if (group_->anyone_waiting()) group_->run_pass();
    }
    close_batch();
    NJ_RETURN_IF_ERROR(record_end());
    return summary_;
  }

 private:
  // What to do after a claimed item could not join the batch.
  enum class Next { kJoined, kSkipped, kStopClaiming };

  // The run itself failed (the store, a full disk, a thread refused): every item of the
  // batch stops as on SIGTERM (checkpoint, commit, lease given back), and the run returns
  // `st`.
  void fail_run(const Status& st) {
    if (fatal_.ok()) fatal_ = st;
    stop_.request("run failed: " + st.message());
  }

  bool may_claim() const {
    const int64_t counted = summary_.done + summary_.failed + static_cast<int64_t>(held_.size());
    const bool alone = std::any_of(held_.begin(), held_.end(),
                                   [](const Held& h) { return h.claim.alone(); });
    return fatal_.ok() && !stop_.reason() &&
           !(options_.max_items && counted >= *options_.max_items) &&
           (held_.empty() || (!alone && static_cast<int>(held_.size()) < models_.batch() &&
                              window_room().value_or(1) > 0));
  }

  // A layer sweep's window fills by its documents' rows: the most prompt tokens the next item
  // may have to join the documents held (SweepWindowFill). nullopt when the batch is not a
  // sweep's or holds nothing yet (its first document always fits).
  std::optional<int64_t> window_room() const {
    if (held_.empty() || !models_.sweep()) return std::nullopt;
    SweepWindowFill fill = models_.window_fill();
    for (const Held& h : held_) fill.add(static_cast<int64_t>(h.claim.item.prompt_ids.size()));
    return fill.room();
  }

  // Claims items while the batch has room. Status only for store failures.
  Status fill_batch() {
    while (may_claim()) {
      ClaimFilter filter;
      for (const Held& h : held_) filter.held.insert(h.claim.item.id);
      if (!held_.empty())
        filter.model = ClaimFilter::Model{
            held_.front().claim.job.model_dir, held_.front().claim.job.memory_bytes.value_or(0),
            models_.context(), held_.front().claim.job.kind, models_.speculative_text()};
      filter.max_prompt_tokens = window_room();
      if (filter.max_prompt_tokens) filter.job_id = held_.front().claim.job.id;
      std::vector<Reclaimed> reclaimed;
      NJ_ASSIGN_OR_RETURN(std::optional<Claim> claim,
                          store_.claim_next(owner_, options_.lease_s, alive_, filter, &reclaimed));
      NJ_RETURN_IF_ERROR(settle_reclaimed(reclaimed));
      if (!claim) break;
      said_idle_ = false;
      if (join(std::move(*claim)) == Next::kStopClaiming) break;
    }
    return Status();
  }

  // Items a claim took over from a dead (or stuck) run: those it failed for good count as
  // failed in this run, and their jobs may now be complete (outputs). Status only for store
  // failures.
  Status settle_reclaimed(const std::vector<Reclaimed>& reclaimed) {
    for (const Reclaimed& r : reclaimed) {
      NJ_ASSIGN_OR_RETURN(JobSummary job, store_.job_summary(r.job_id));
      if (r.state != ItemState::kFailed) {
        spdlog::warn("{} item {}: taken over: {}", job_label(job.job), r.custom_id, r.error);
        continue;
      }
      ++summary_.failed;
      spdlog::error("{} item {}: failed for good: {}", job_label(job.job), r.custom_id, r.error);
      summary_.failed_items.push_back({r.job_id, job.job.name, r.custom_id, r.error});
      ended_.emplace(r.job_id, job.job);
    }
    return finish_ended_jobs();
  }

  void outputs_failed(const JobRow& job) {
    ++summary_.outputs_failed;
    summary_.outputs_failed_jobs.emplace_back(job.id, job.name);
  }

  // Writes the outputs of the jobs in `ended_` that are complete, and forgets them.
  Status finish_ended_jobs() {
    Status st;
    for (const auto& [id, job] : ended_) {
      auto outputs_ok = finish_job_if_complete(store_, job, home_);
      if (!outputs_ok.ok()) {
        st = outputs_ok.status();
        break;
      }
      if (!*outputs_ok) outputs_failed(job);
    }
    ended_.clear();
    return st;
  }

  // Jobs that ended while no run could write their outputs (a run killed between its last
  // item's end and the write): complete, with outputs declared and never written. Status
  // only for store failures.
  Status finish_unwritten_outputs() {
    NJ_ASSIGN_OR_RETURN(std::vector<JobSummary> jobs, store_.list_jobs());
    for (const JobSummary& j : jobs)
      if (j.queued + j.running == 0 && j.done + j.failed > 0 && !j.job.outputs_state &&
          declares_outputs(j.job))
        ended_.emplace(j.job.id, j.job);
    return finish_ended_jobs();
  }

  // A claimed item joins the batch (opening the batch's model first when it has none).
  Next join(Claim claim) {
    const ItemRow& item = claim.item;
    spdlog::info("{} item {}: {} ({} of {} tokens stored, {} failed attempts before)",
                 job_label(claim.job), item.custom_id,
                 item.tokens_done > 0 ? "resuming" : "starting", item.tokens_done,
                 item.max_tokens, item.attempts);
    if (claim.alone())
      spdlog::warn("{} item {}: runs alone (the process died {} times while it shared a batch)",
                   job_label(claim.job), item.custom_id, item.batch_deaths);
    if (Status st = keeper_.add(item.id); !st.ok()) {
      release_after_failure(store_, owner_, claim.job, item, st);
      fail_run(st);
      return Next::kStopClaiming;
    }
    const int64_t context = job_context(claim);
    if (held_.empty() && !models_.holds(claim.job, context)) close_batch();
    if (!group_) {
      const Next opened = open_batch(claim, context);
      if (opened != Next::kJoined) return opened;
    }
    held_.push_back(Held{std::move(claim), nullptr, Clock::now(), std::nullopt});
    Held& h = held_.back();
    h.lease = std::make_unique<ItemLease>(keeper_, h.claim.item.id);
    Model& model = *batch_model_;
    const Tokenizer* tokenizer = models_.tokenizer();
    group_->spawn([this, &h = h, &model = model, tokenizer, speculation = models_.speculation()] {
      ItemEnv env{store_, model,     tokenizer, files_,       item_options_, owner_,
                  stop_,  *h.lease,  *group_,   prefix_gate_, progress_,     speculation};
      h.report = run_claimed(env, h.claim);
    });
    return Next::kJoined;
  }

  // The model for `claim`'s job and a Forward and PassGroup over it. When the model cannot
  // be opened the item's attempt fails (kSkipped), or the run when the store fails.
  Next open_batch(const Claim& claim, int64_t context) {
    auto jobs = store_.list_jobs();
    bool permanent = false;
    Result<int64_t> longest = store_.longest_prompt(claim.job.id);
    if (!longest.ok()) return fail_open(claim, longest.status(), false);
    auto model = jobs.ok() ? models_.get(claim.job, context, items_for_batch(*jobs, claim.job),
                                         *longest, &permanent)
                           : Result<Model*>(jobs.status());
    if (!model.ok()) return fail_open(claim, model.status(), permanent);
    // The activations of the plan (with drafts, a pass holds 1 + draft_tokens rows of every
    // item beside the prefill chunks), as the model was planned.
    const ModelPlan& plan = (*model)->model_plan();
    batch_model_ = *model;
    forward_ = std::make_unique<Forward>(batch_model_->config(), batch_model_->weights(),
                                         plan.forward_options());
    group_ = std::make_unique<PassGroup>(*forward_, plan.activation_shape().rows);
    item_options_.sweep = models_.sweep();
    item_options_.prompt_sweep_rows = plan.prompt_sweep_rows;
    group_->sweep_prompts(plan.prompt_sweep_rows);
    group_->keep_sweep_boundaries(SweepKeeping{home_.dir, batch_model_->fingerprint(),
                                               item_options_.checkpoint_interval_s,
                                               [this] { return stop_.reason().has_value(); }});
    return Next::kJoined;
  }

  // The model of `claim`'s job failed to open: a failed attempt of the item, retried after a
  // backoff when the model may yet appear (not found, an I/O error: a disk not mounted yet),
  // failed at once when a file is there but damaged (a truncated or malformed shard, config or
  // tokenizer: Corruption, InvalidArgument), which waiting does not mend, or when the failure
  // is `permanent` (its plan: a budget below the minimum fails every attempt the same way).
  Next fail_open(const Claim& claim, const Status& why, bool permanent) {
    const ItemRow& item = claim.item;
    keeper_.remove(item.id);
    const bool damaged =
        why.code() == StatusCode::kCorruption || why.code() == StatusCode::kInvalidArgument;
    const double wait_s = retry_wait_s(options_, item.attempts);
    const std::string error =
        damaged ? "the model is damaged: " + why.message() + " (fix the file, then `nightjar retry " +
                      std::to_string(claim.job.id) + "`)"
        : permanent && why.code() == StatusCode::kResourceExhausted
            ? job_label(claim.job) + ", memory: " +
                  (claim.job.memory_bytes ? format_bytes(*claim.job.memory_bytes)
                                          : std::string("none")) +
                  ": " + why.message() + "; every attempt would fail the same way"
            : why.message();
    const bool final = damaged || permanent;
    auto state = store_.fail_attempt(item.id, owner_, Progress{item.tokens_done, {}, 0, 0}, error,
                                     final, final ? std::nullopt : std::optional(wait_s));
    if (!state.ok()) {
      release_after_failure(store_, owner_, claim.job, item, state.status());
      fail_run(state.status());
      return Next::kStopClaiming;
    }
    spdlog::error("{} item {}: {}", job_label(claim.job), item.custom_id, error);
    if (*state == ItemState::kFailed) {
      ++summary_.failed;
      summary_.failed_items.push_back(
          {claim.job.id, claim.job.name, item.custom_id, why.message()});
      auto outputs_ok = finish_job_if_complete(store_, claim.job, home_);
      if (!outputs_ok.ok()) {
        fail_run(outputs_ok.status());
        return Next::kStopClaiming;
      }
      if (!*outputs_ok) outputs_failed(claim.job);
    } else if (*state == ItemState::kQueued) {
      ++summary_.failed_attempts;
      spdlog::info("{} item {}: next attempt in {}", job_label(claim.job), item.custom_id,
                   format_duration(wait_s));
    }
    return Next::kSkipped;
  }

  // Ends the batch: its pass totals join the run's; the group goes before the Forward.
  void close_batch() {
    if (group_) summary_.passes.add(group_->totals());
    group_.reset();
    forward_.reset();
  }

  // Nothing held: true when the run ends (stop, --max-items, --drain and the queue empty),
  // else after waiting for work false. The run's failure, or a store failure, as a Status.
  Result<bool> idle() {
    if (!fatal_.ok()) return fatal_;
    if (auto reason = stop_.reason()) {
      summary_.end_reason = *reason;
      return true;
    }
    if (options_.max_items && summary_.done + summary_.failed >= *options_.max_items) {
      summary_.end_reason = "--max-items " + std::to_string(*options_.max_items);
      return true;
    }
    NJ_ASSIGN_OR_RETURN(std::optional<double> retry_at, store_.next_retry_at());
    if (options_.drain && retry_at) {  // queued, waiting out a backoff: not empty yet
      idle_wait(std::min(options_.poll_interval_s, *retry_at - store_.now()), stop_);
      return false;
    }
    if (options_.drain) {
      summary_.end_reason = "queue empty";
      return true;
    }
    if (!said_idle_) spdlog::info("nothing queued; waiting for work (--drain exits instead)");
    said_idle_ = true;
    idle_wait(options_.poll_interval_s, stop_);
    return false;
  }

  // Waits for the members, settles the items that finished and writes the outputs of the
  // jobs they ended. Returns whether a place in the batch was freed.
  bool settle_finished() {
    group_->wait_for_members();
    bool freed = false;
    for (auto it = held_.begin(); it != held_.end();) {
      if (!it->report) {
        ++it;
        continue;
      }
      if (Status st = settle(*it); !st.ok()) fail_run(st);
      it = held_.erase(it);
      freed = true;
    }
    if (Status st = finish_ended_jobs(); !st.ok()) fail_run(st);
    return freed;
  }

  // Records what a finished item did; a job one of its items ended goes into `ended_` (its
  // outputs are written once per round, after every finished item is settled: items of one
  // job may end in the same round). Status only for store failures.
  Status settle(Held& h) {
    keeper_.remove(h.claim.item.id);
    if (!h.report->ok()) {
      release_after_failure(store_, owner_, h.claim.job, h.claim.item, h.report->status());
      return h.report->status();
    }
    const AttemptReport& report = **h.report;
    summary_.tokens += report.tokens_generated;
    summary_.speculation.add(report.speculation);
    if (report.state_after == ItemState::kDone || report.state_after == ItemState::kFailed)
      ended_.emplace(h.claim.job.id, h.claim.job);
    switch (report.outcome) {
      case ItemOutcome::kDone:
        ++summary_.done;
        spdlog::info("{} item {}: done ({} new tokens in {:.2f} s)", job_label(h.claim.job),
                     h.claim.item.custom_id, report.tokens_generated,
                     std::chrono::duration<double>(Clock::now() - h.started).count());
        break;
      case ItemOutcome::kStopped:
        ++summary_.stopped;
        break;
      case ItemOutcome::kLostLease:
        break;
      case ItemOutcome::kAttemptFailed:
        if (report.state_after == ItemState::kFailed) {
          ++summary_.failed;
          summary_.failed_items.push_back(
              {h.claim.job.id, h.claim.job.name, h.claim.item.custom_id, report.message});
        } else
          ++summary_.failed_attempts;
        break;
    }
    return Status();
  }

  // The run's totals, which its items' engine shares add up to (`nightjar report`), as the
  // store's run_ended event and a log line.
  Status record_end() {
    const RunSummary& summary = summary_;
    const PassTotals& t = summary.passes;
    NJ_RETURN_IF_ERROR(store_.add_event(
        std::nullopt, std::nullopt, "run_ended",
        nlohmann::json{{"reason", summary.end_reason},
                       {"done", summary.done},
                       {"failed", summary.failed},
                       {"tokens", summary.tokens},
                       {"passes", t.passes},
                       {"sweeps", t.sweeps},
                       {"rows", t.rows},
                       {"bytes_read", static_cast<uint64_t>(std::llround(t.bytes_read))},
                       {"load_bytes", models_.load_bytes()},
                       {"compute_s", t.compute_s},
                       {"io_wait_s", t.wait_s},
                       {"max_batch", t.max_sequences},
                       {"speculation",
                        {{"passes", summary.speculation.passes},
                         {"drafted", summary.speculation.drafted},
                         {"accepted", summary.speculation.accepted}}},
                       {"seconds", std::chrono::duration<double>(Clock::now() - t_start_).count()}}
            .dump()));
    spdlog::info(
        "run ended ({}): {} done, {} failed, {}; {} tokens in {:.1f} s; up to {} per pass{}{}",
        summary.end_reason, plural(summary.done, "item", "items"), summary.failed,
        plural(summary.failed_attempts, "failed attempt", "failed attempts"), summary.tokens,
        std::chrono::duration<double>(Clock::now() - t_start_).count(),
        plural(summary.passes.max_sequences, "item", "items"),
        summary.speculation.passes
            ? fmt::format("; speculation: {} passes, {} drafted, {} accepted",
                          summary.speculation.passes, summary.speculation.drafted,
                          summary.speculation.accepted)
            : std::string(),
        summary.outputs_failed ? "; the outputs of " + job_labels(summary.outputs_failed_jobs) +
                                     " could not be written"
                               : std::string());
    return Status();
  }

  const Home& home_;
  JobStore& store_;
  const SchedulerOptions& options_;
  StopControl& stop_;
  ProgressReporter& progress_;
  const std::string owner_;
  LeaseKeeper keeper_;
  StateCheckpoints files_;
  ModelCache models_;
  const OwnerAliveFn alive_;
  ItemRunOptions item_options_;
  const Clock::time_point t_start_ = Clock::now();
  RunSummary summary_;
  bool said_idle_ = false;
  std::unique_ptr<Forward> forward_;
  Model* batch_model_ = nullptr;  // the model forward_ computes with
  std::unique_ptr<PassGroup> group_;
  std::list<Held> held_;
  PrefixGate prefix_gate_;
  Status fatal_;
  std::map<int64_t, JobRow> ended_;
};

}  // namespace

Result<RunSummary> run_queue(const Home& home, JobStore& store, const SchedulerOptions& options,
                             StopControl& stop, ProgressReporter& progress) {
  QueueRun run(home, store, options, stop, progress);
  return run.run();
}

}  // namespace nj::runner
