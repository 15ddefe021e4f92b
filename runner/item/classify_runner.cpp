// One classify item through the engine: prefix state, suffix prefill, constrained label
// scoring, the finish.
#include "runner/item/classify_runner.h"

#include <algorithm>
#include <utility>
#include <chrono>
#include <optional>
#include <string_view>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/ops/numerics.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "jobs/spec/job_spec.h"
#include "jobs/spec/label_trie.h"
#include "runner/item/chunked_feed.h"
#include "runner/item/clock.h"
#include "runner/store/job_label.h"
#include "runner/item/item_end.h"
#include "runner/durable/prefix_states.h"
#include "runner/store/job_settings.h"

namespace nj::runner {
namespace {

class ClassifyRun {
 public:
  ClassifyRun(const ItemEnv& env, const Claim& claim)
      : env_(env),
        claim_(claim),
        item_(claim.item),
        prefixes_(env.checkpoints.home_dir()),
        label_(job_label(claim.job) + " item " + claim.item.custom_id),
        end_(env, claim, label_) {}

  Result<AttemptReport> run();

 private:
  using Step = FeedStep;  // never kDiverged: nothing is replayed
  // The label scores' inputs: the logits after the document (the trie's root) and at each
  // branching node of the label trie.
  struct LabelLogits {
    std::vector<float> root;
    std::vector<std::vector<float>> branch;  // [trie.branch_paths().size()]
  };
  // Token-major: the document in prefill chunks, then each feed path decoded token by token
  // from the state after the document.
  Result<Step> passes_document(const jobs::LabelTrie& trie, int64_t resumed, LabelLogits& out);
  // The layer sweep: the document and its feed paths (branches from its end) in the batch's
  // next sweep.
  Result<Step> sweep_document(const jobs::LabelTrie& trie, int64_t resumed, LabelLogits& out);

  // session_->feed, adding what the engine did to `usage` (the item's, or the prefix's).
  Status feed(std::span<const int32_t> ids, EngineUsage& usage, bool decode);
  // Feeds `ids` in prefill chunks, checking lease and stop between them (chunked_feed.h).
  Result<Step> feed_chunked(std::span<const int32_t> ids, EngineUsage& usage, double& seconds,
                            const char* what);
  // Puts the state after the template prefix into session_ (see classify_runner.h).
  Result<Step> prefix();
  // A long document's prefill is checkpointed between its chunks (at the item's checkpoint
  // cadence), so that a stopped or interrupted item resumes there rather than from the
  // prefix. restore_document() puts the newest usable checkpoint of this item into
  // session_ and returns the document tokens it holds (0: none, or it was unusable;
  // nullopt: the lease is gone).
  Result<std::optional<int64_t>> restore_document();
  // Saves a checkpoint of the state mid-document when one is due (`now`: whenever the
  // state holds document tokens not yet saved). False: the lease is gone.
  Result<bool> checkpoint_document(bool now = false);
  Result<AttemptReport> stopped(const std::string& reason);
  // A failed attempt; `final` fails the item at once (an error every attempt would repeat).
  Result<AttemptReport> fail(const std::string& error, bool final = false);
  AttemptReport lost();
  Progress progress(std::span<const int32_t> tokens = {}) const {
    return Progress{0, tokens, prefill_s_, decode_s_, usage_};
  }

  const ItemEnv& env_;
  const Claim& claim_;
  const ItemRow& item_;
  PrefixStates prefixes_;
  std::string label_;
  ItemEnd end_;  // how an attempt ends short of the finish (stop, fail, lost)
  jobs::ClassifySettings settings_;
  std::unique_ptr<ItemSession> session_;
  int window_ = 0;                              // the documents that shared its sweep
  EngineUsage usage_;  // the item's engine work since its last write to the store
  double prefill_s_ = 0, decode_s_ = 0;
  FeedError engine_error_;
  std::string prefix_source_;  // "restored", "prefilled", "swept", "fed" (reuse off) or "none"
  double prefix_restore_s_ = 0;
  int64_t checkpoint_position_ = -1;  // position of the newest document checkpoint
  int checkpoint_failures_ = 0;       // saves failed in a row (a full disk): warned once
  Clock::time_point last_checkpoint_ = Clock::now();
  std::unique_ptr<ItemCheckpointWriter> checkpoint_writer_;
  int64_t resumed_tokens_ = 0;  // document tokens a checkpoint restored
};

Status ClassifyRun::feed(std::span<const int32_t> ids, EngineUsage& usage, bool decode) {
  return feed_counted(*session_, ids, nullptr, decode, usage);
}

Result<ClassifyRun::Step> ClassifyRun::feed_chunked(std::span<const int32_t> ids,
                                                    EngineUsage& usage, double& seconds,
                                                    const char* what) {
  const ChunkedFeed chunked{
      *session_, env_.options.prefill_chunk, usage, seconds, env_.progress, what, 0, engine_error_};
  return feed_chunks(chunked, ids, [this, what](int64_t, std::span<const float>) -> Result<Step> {
    if (std::string_view(what) == "document") {
      NJ_ASSIGN_OR_RETURN(bool owned, checkpoint_document());
      if (!owned) return Step::kLost;
    }
    return lease_and_stop(env_);
  });
}

Result<std::optional<int64_t>> ClassifyRun::restore_document() {
  if (claim_.checkpoints.empty()) return std::optional<int64_t>(0);
  const CheckpointRow& row = claim_.checkpoints.front();  // the newest
  auto loaded = env_.checkpoints.load(row.path, env_.model);
  const auto prefix = static_cast<int64_t>(settings_.prefix_ids.size());
  std::string why;
  if (!loaded.ok()) {
    why = loaded.status().message();
  } else {
    // It must hold the prefix and a beginning of this document, and nothing else.
    const std::vector<int32_t>& t = loaded->state.tokens;
    const auto n = static_cast<int64_t>(t.size());
    const bool fits = loaded->state.position == n && n > prefix &&
                      n <= prefix + static_cast<int64_t>(item_.prompt_ids.size()) &&
                      std::equal(settings_.prefix_ids.begin(), settings_.prefix_ids.end(), t.begin()) &&
                      std::equal(t.begin() + prefix, t.end(), item_.prompt_ids.begin());
    if (fits) {
      session_->set_state(std::move(loaded->state));
      checkpoint_position_ = n;
      resumed_tokens_ = n - prefix;
      spdlog::info("{}: resuming the document at token {} of {} from its checkpoint", label_,
                   resumed_tokens_, item_.prompt_ids.size());
      return std::optional<int64_t>(resumed_tokens_);
    }
    why = "it holds other tokens than the prefix and this document";
  }
  spdlog::warn("{}: document checkpoint {} is unusable ({}); prefilling the document again",
               label_, row.path, why);
  NJ_RETURN_IF_ERROR(env_.store.add_event(claim_.job.id, item_.id, "checkpoint_unusable",
                                          nlohmann::json{{"path", row.path}, {"error", why}}.dump()));
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.drop_checkpoints(item_.id, env_.owner));
  if (!owned) return std::optional<int64_t>();
  env_.checkpoints.remove_item(item_.id);
  return std::optional<int64_t>(0);
}

Result<bool> ClassifyRun::checkpoint_document(bool now) {
  if (!session_) return true;
  const int64_t position = session_->position();
  const auto prefix = static_cast<int64_t>(settings_.prefix_ids.size());
  const auto document_end = prefix + static_cast<int64_t>(item_.prompt_ids.size());
  if (position <= prefix || position >= document_end || position <= checkpoint_position_)
    return true;  // nothing of the document yet, or all of it (the labels come next)
  const int64_t since = position - std::max<int64_t>(checkpoint_position_, prefix);
  const bool due = now || since >= env_.options.checkpoint_tokens ||
                   seconds_since(last_checkpoint_) >= env_.options.checkpoint_interval_s;
  if (!due) return true;
  last_checkpoint_ = Clock::now();
  if (!checkpoint_writer_) {
    auto w = env_.checkpoints.writer(item_.id);
    if (!w.ok()) {
      if (checkpoint_failures_++ == 0)  // as a failed save below: said once
        spdlog::warn("{}: no document checkpoint: {} (the item goes on; further failures are "
                     "logged at debug level until a save succeeds)",
                     label_, w.status().message());
      else
        spdlog::debug("{}: no document checkpoint: {}", label_, w.status().message());
      return true;  // the item goes on; a stop redoes it from the prefix
    }
    checkpoint_writer_ = std::move(*w);
  }
  const Sampler greedy{SamplingParams{}};  // a classification samples nothing
  auto bytes = checkpoint_writer_->save(env_.model, session_->state(), greedy);
  if (!bytes.ok()) {
    // A full disk fails every save until space is freed: one warning, not one per save.
    if (checkpoint_failures_++ == 0)
      spdlog::warn("{}: could not write a document checkpoint: {} (the item goes on; further "
                   "failures are logged at debug level until a save succeeds)",
                   label_, bytes.status().message());
    else
      spdlog::debug("{}: could not write a document checkpoint: {}", label_,
                    bytes.status().message());
    return true;
  }
  if (checkpoint_failures_ > 0)
    spdlog::info("{}: document checkpoint written again after {} failed saves", label_,
                 std::exchange(checkpoint_failures_, 0));
  const NewCheckpoint cp{position, 0, StateCheckpoints::item_path(item_.id), *bytes};
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.add_checkpoint(item_.id, env_.owner, progress(), cp));
  if (!owned) return false;
  // The store has this work now: what the next write hands over starts from here.
  usage_ = {};
  prefill_s_ = decode_s_ = 0;
  checkpoint_position_ = position;
  spdlog::debug("{}: document checkpoint at position {} ({} bytes)", label_, position, *bytes);
  return true;
}

Result<ClassifyRun::Step> ClassifyRun::prefix() {
  session_ = std::make_unique<ItemSession>(env_.passes, env_.options.prefill_chunk);
  const std::vector<int32_t>& ids = settings_.prefix_ids;
  if (ids.empty()) {
    prefix_source_ = "none";
    return Step::kOk;
  }
  if (!env_.options.prefix_reuse) {
    prefix_source_ = "fed";
    return feed_chunked(ids, usage_, prefill_s_, "prefix");
  }
  if (env_.options.sweep) {
    // The window's sweep computes the prefix once, as the parent of its documents, one layer
    // at a time: nothing to read or hold here (sweep_document).
    prefix_source_ = "swept";
    return Step::kOk;
  }
  const int64_t job = claim_.job.id;
  // Another item of this batch is prefilling the prefix: its passes go on while this one
  // waits, then this one finds the saved state.
  while (env_.prefix_gate.busy(job)) {
    if (Status s = session_->skip_pass(); !s.ok()) {
      engine_error_ = FeedError{s.message()};
      return Step::kEngineError;
    }
    if (Step step = lease_and_stop(env_); step != Step::kOk) return step;
  }
  // Loading gives up no turn (only feeds do), so every item of a window that finds the saved
  // state loads it before the next pass, and their documents share it.
  auto t0 = Clock::now();
  auto loaded = prefixes_.load(job, env_.model, ids);
  if (!loaded.ok()) {
    // This item prefills it; the others of the batch wait at the gate meanwhile.
    env_.prefix_gate.enter(job);
    struct Leave {
      PrefixGate& gate;
      int64_t job;
      ~Leave() { gate.leave(job); }
    } leave{env_.prefix_gate, job};
    // Another process may be prefilling it: wait for its lock, then look again.
    NJ_ASSIGN_OR_RETURN(PrefixLock lock, prefixes_.lock(job));
    t0 = Clock::now();
    loaded = prefixes_.load(job, env_.model, ids);
    if (!loaded.ok()) {
      const std::string rel = PrefixStates::job_path(job);
      if (loaded.status().code() != StatusCode::kNotFound) {
        spdlog::warn("{}: the prefix state {} is unusable ({}); prefilling the prefix again",
                     label_, rel, loaded.status().message());
        NJ_RETURN_IF_ERROR(env_.store.add_event(
            job, item_.id, "prefix_unusable",
            nlohmann::json{{"path", rel}, {"error", loaded.status().message()}}.dump()));
      }
      EngineUsage usage;
      double seconds = 0;
      NJ_ASSIGN_OR_RETURN(Step step, feed_chunked(ids, usage, seconds, "prefix"));
      if (step != Step::kOk) return step;
      auto t_save = Clock::now();
      auto bytes = prefixes_.save(job, env_.model, session_->state());
      nlohmann::json detail = {{"tokens", ids.size()},
                               {"prefill_s", seconds},
                               {"tokens_fed", usage.tokens_fed},
                               {"compute_s", usage.compute_s},
                               {"io_wait_s", usage.io_wait_s},
                               {"bytes_read", usage.bytes_read},
                               {"path", rel}};
      if (bytes.ok()) {
        detail["bytes"] = *bytes;
        detail["save_s"] = seconds_since(t_save);
      } else {
        // The next item prefills again; this one goes on with the state in memory.
        spdlog::warn("{}: could not save the prefix state: {}", label_, bytes.status().message());
        detail["save_error"] = bytes.status().message();
      }
      NJ_RETURN_IF_ERROR(env_.store.add_event(job, item_.id, "prefix_prefilled", detail.dump()));
      spdlog::info("{}: prefilled the job's template prefix ({} tokens in {:.3f} s)", label_,
                   ids.size(), seconds);
      prefix_source_ = "prefilled";
      return Step::kOk;
    }
  }
  session_->set_state(std::move(*loaded));
  prefix_restore_s_ = seconds_since(t0);
  prefix_source_ = "restored";
  return Step::kOk;
}

Result<AttemptReport> ClassifyRun::stopped(const std::string& reason) {
  // A stop keeps the document's prefill done so far.
  NJ_ASSIGN_OR_RETURN(bool owned, checkpoint_document(/*now=*/true));
  if (!owned) return lost();
  if (checkpoint_position_ > 0) {
    const nlohmann::json detail = {{"checkpoint_position", checkpoint_position_},
                                   {"note", "a classify item resumes from its document checkpoint"}};
    return end_.stopped(reason, detail, progress(), 0,
                        "; it resumes from its checkpoint at position " +
                            std::to_string(checkpoint_position_));
  }
  const nlohmann::json detail = {{"note", "a classify item is redone from its prefix"}};
  return end_.stopped(reason, detail, progress(), 0, "; it is redone later");
}

Result<AttemptReport> ClassifyRun::fail(const std::string& error, bool final) {
  return end_.failed(error, final, progress(), 0);
}

AttemptReport ClassifyRun::lost() {
  return end_.lost(0);
}

Result<ClassifyRun::Step> ClassifyRun::passes_document(const jobs::LabelTrie& trie,
                                                       int64_t resumed, LabelLogits& out) {
  NJ_ASSIGN_OR_RETURN(Step step, feed_chunked(std::span<const int32_t>(item_.prompt_ids).subspan(
                                                  static_cast<size_t>(resumed)),
                                              usage_, prefill_s_, "document"));
  if (step != Step::kOk) return step;
  auto t_decode = Clock::now();
  out.root = session_->last_logits();
  const auto paths = trie.feed_paths();
  if (!paths.empty()) {
    const SequenceState after_prompt = session_->state();
    for (size_t k = 0; k < paths.size(); ++k) {
      if (k > 0) session_->set_state(after_prompt);
      for (size_t j = 0; j < paths[k].size(); ++j) {
        if (Status s = feed(std::span<const int32_t>(&paths[k][j], 1), usage_, /*decode=*/true);
            !s.ok()) {
          engine_error_ = FeedError{s.message(), s.code() == StatusCode::kNonFinite};
          return Step::kEngineError;
        }
        const int b = trie.branch_index(std::span<const int32_t>(paths[k]).first(j + 1));
        if (b >= 0) out.branch[static_cast<size_t>(b)] = session_->last_logits();
      }
    }
  }
  decode_s_ += seconds_since(t_decode);
  return Step::kOk;
}

Result<ClassifyRun::Step> ClassifyRun::sweep_document(const jobs::LabelTrie& trie, int64_t resumed,
                                                      LabelLogits& out) {
  const auto paths = trie.feed_paths();
  const size_t vocab = static_cast<size_t>(env_.model.config().vocab);
  // Where the document starts: the state its session holds (a restored document checkpoint,
  // or a prefix fed without reuse), else after the job's prefix in the same window (the
  // sweep's parent of its documents), else nothing.
  const SequenceState* start = session_->position() > 0 ? &session_->state() : nullptr;
  const std::span<const int32_t> after =
      start ? std::span<const int32_t>() : std::span<const int32_t>(settings_.prefix_ids);
  std::vector<std::vector<float>> rows(paths.size());
  std::vector<SweepSequence> part(1 + paths.size());
  part[0] = SweepSequence{std::span<const int32_t>(item_.prompt_ids).subspan(static_cast<size_t>(resumed)),
                          start, -1, LogitsWanted::kLast, nullptr, &out.root};
  for (size_t k = 0; k < paths.size(); ++k) {
    rows[k].resize(paths[k].size() * vocab);
    part[1 + k] = SweepSequence{paths[k], nullptr, 0, LogitsWanted::kAll, rows[k].data()};
  }
  const SequenceUsage before = session_->usage();
  const auto t0 = Clock::now();
  const Status st = session_->sweep(part, claim_.job.id, item_.id, after);
  prefill_s_ += seconds_since(t0);
  add_usage(before, session_->usage(), /*decode=*/false, usage_);
  window_ = session_->last_sweep_window();
  // Stopped at a layer boundary (saved there): the item is redone from it later.
  if (st.code() == StatusCode::kCancelled && env_.stop.reason()) return Step::kStopped;
  if (!st.ok()) {
    engine_error_ = FeedError{st.message(), st.code() == StatusCode::kNonFinite};
    return Step::kEngineError;
  }
  for (size_t k = 0; k < paths.size(); ++k)
    for (size_t j = 0; j < paths[k].size(); ++j) {
      const int b = trie.branch_index(std::span<const int32_t>(paths[k]).first(j + 1));
      if (b >= 0)
        out.branch[static_cast<size_t>(b)].assign(rows[k].begin() + static_cast<long>(j * vocab),
                                                  rows[k].begin() + static_cast<long>((j + 1) * vocab));
    }
  // The work is done: a stop asked for meanwhile waits for the result to be stored.
  return env_.lease.lost() ? Step::kLost : Step::kOk;
}

Result<AttemptReport> ClassifyRun::run() {
  auto settings = JobSettings::of(claim_.job).classify();
  if (!settings.ok()) return fail(settings.status().message());
  settings_ = std::move(*settings);
  auto trie = jobs::LabelTrie::build(settings_.label_ids, settings_.labels);
  if (!trie.ok()) return fail(trie.status().message());
  if (item_.prompt_ids.empty()) return fail("the item has an empty prompt");
  if (!claim_.tokens.empty())
    return fail("the store holds output tokens for a classify item (expected none before finish)");
  const int32_t vocab = env_.model.config().vocab;
  for (std::span<const int32_t> ids :
       {std::span<const int32_t>(item_.prompt_ids), std::span<const int32_t>(settings_.prefix_ids)})
    for (int32_t id : ids)
      if (id < 0 || id >= vocab)
        return fail("token id " + std::to_string(id) + " is outside the model's vocabulary");
  env_.progress.begin_item(label_, 0, 1);

  auto step_outcome = [&](Step step) -> std::optional<Result<AttemptReport>> {
    switch (step) {
      case Step::kOk:
      case Step::kDiverged:  // never: a classify item replays nothing
        return std::nullopt;
      case Step::kStopped:
        return stopped(*env_.stop.reason());
      case Step::kLost:
        return lost();
      case Step::kEngineError:
        return fail(engine_error_.message, engine_error_.final);
    }
    return std::nullopt;
  };
  NJ_ASSIGN_OR_RETURN(Step step, prefix());
  if (auto out = step_outcome(step)) return std::move(*out);
  NJ_ASSIGN_OR_RETURN(std::optional<int64_t> resumed, restore_document());
  if (!resumed) return lost();
  LabelLogits logits;
  logits.branch.resize(trie->branch_paths().size());
  NJ_ASSIGN_OR_RETURN(step, env_.options.sweep ? sweep_document(*trie, *resumed, logits)
                                               : passes_document(*trie, *resumed, logits));
  if (auto out = step_outcome(step)) return std::move(*out);
  std::vector<std::span<const float>> rows(logits.branch.begin(), logits.branch.end());
  const jobs::LabelScores scores = trie->score(logits.root, rows);
  if (env_.lease.lost()) return lost();

  const std::string& answer = settings_.labels[scores.best];
  nlohmann::json probabilities = nlohmann::json::object();
  for (size_t l = 0; l < settings_.labels.size(); ++l)
    probabilities[settings_.labels[l]] = scores.probabilities[l];
  nlohmann::json details = {{"label", answer},
                            {"probabilities", probabilities},
                            {"margin", scores.margin},
                            {"decode_steps", usage_.decode_steps},
                            {"prefix_tokens", settings_.prefix_ids.size()},
                            {"suffix_tokens", item_.prompt_ids.size()},
                            {"prefix", prefix_source_},
                            {"prefix_restore_s", prefix_restore_s_},
                            {"schedule", env_.options.sweep ? "sweep" : "passes"},
                            {"window", env_.options.sweep ? window_ : usage_.max_batch}};
  const std::vector<int32_t>& answer_ids = settings_.label_ids[scores.best];
  NewResult result{"label",
                   static_cast<int64_t>(settings_.prefix_ids.size() + item_.prompt_ids.size()),
                   answer, details.dump(), static_cast<int>(kNumericsVersion)};
  NJ_ASSIGN_OR_RETURN(bool owned,
                      env_.store.finish_item(item_.id, env_.owner, progress(answer_ids), result));
  if (!owned) return lost();
  if (checkpoint_position_ > 0 || !claim_.checkpoints.empty()) env_.checkpoints.remove_item(item_.id);
  spdlog::debug("{}: {} (p {:.4f}, margin {:.4f}, {} decode steps)", label_, answer,
                scores.probabilities[scores.best], scores.margin, usage_.decode_steps);
  return AttemptReport{ItemOutcome::kDone, ItemState::kDone, "",
                    static_cast<int64_t>(answer_ids.size())};
}

}  // namespace

Result<AttemptReport> run_classify_item(const ItemEnv& env, const Claim& claim) {
  ClassifyRun run(env, claim);
  auto report = run.run();
  env.progress.end_item();
  return report;
}

}  // namespace nj::runner
