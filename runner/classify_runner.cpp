// One classify item through the engine: prefix state, suffix prefill, constrained label
// scoring, the finish.
#include "runner/classify_runner.h"

#include <chrono>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/model/numerics.h"
#include "engine/model/session.h"
#include "jobs/job_spec.h"
#include "jobs/label_trie.h"
#include "runner/prefix_states.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class ClassifyRun {
 public:
  ClassifyRun(const ItemEnv& env, const Claim& claim)
      : env_(env),
        claim_(claim),
        item_(claim.item),
        prefixes_(env.checkpoints.home_dir()),
        label_("job " + std::to_string(claim.job.id) + " item " + claim.item.custom_id) {}

  Result<ItemReport> run();

 private:
  enum class Step { kOk, kStopped, kLost, kEngineError };

  // session_->feed, adding what the engine did to `usage` (the item's, or the prefix's).
  Status feed(std::span<const int32_t> ids, EngineUsage& usage, bool decode);
  // Feeds `ids` in prefill chunks, checking stop and lease between them.
  Result<Step> feed_chunked(std::span<const int32_t> ids, EngineUsage& usage, double& seconds,
                            const char* what);
  // Puts the state after the template prefix into session_ (see classify_runner.h).
  Result<Step> prefix();
  Result<ItemReport> stopped(const std::string& reason);
  // A failed attempt; `final` fails the item at once (an error every attempt would repeat).
  Result<ItemReport> fail(const std::string& error, bool final = false);
  ItemReport lost();
  Progress progress(std::span<const int32_t> tokens = {}) const {
    return Progress{0, tokens, prefill_s_, decode_s_, usage_};
  }

  const ItemEnv& env_;
  const Claim& claim_;
  const ItemRow& item_;
  PrefixStates prefixes_;
  std::string label_;
  jobs::ClassifySettings settings_;
  std::unique_ptr<ItemSession> session_;
  EngineUsage usage_;  // the item's engine work
  double prefill_s_ = 0, decode_s_ = 0;
  std::string engine_error_;
  bool engine_error_final_ = false;  // deterministic: every attempt would repeat it
  std::string prefix_source_;  // "restored", "prefilled", "fed" (reuse off) or "none"
  double prefix_restore_s_ = 0;
};

Status ClassifyRun::feed(std::span<const int32_t> ids, EngineUsage& usage, bool decode) {
  return feed_counted(*session_, ids, nullptr, decode, usage);
}

Result<ClassifyRun::Step> ClassifyRun::feed_chunked(std::span<const int32_t> ids,
                                                    EngineUsage& usage, double& seconds,
                                                    const char* what) {
  const size_t chunk = static_cast<size_t>(std::max(1, env_.options.prefill_chunk));
  for (size_t at = 0; at < ids.size(); at += chunk) {
    auto t0 = Clock::now();
    Status s = feed(ids.subspan(at, std::min(chunk, ids.size() - at)), usage, /*decode=*/false);
    seconds += seconds_since(t0);
    if (!s.ok()) {
      engine_error_ = s.message();
      engine_error_final_ = s.code() == StatusCode::kNonFinite;
      return Step::kEngineError;
    }
    env_.progress.feeding(what, static_cast<int64_t>(std::min(at + chunk, ids.size())),
                          static_cast<int64_t>(ids.size()));
    if (env_.lease.lost()) return Step::kLost;
    if (env_.stop.reason()) return Step::kStopped;
  }
  return Step::kOk;
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
  const int64_t job = claim_.job.id;
  // Another item of this batch is loading or prefilling the prefix: its passes go on while
  // this one waits, then this one finds the saved state.
  while (env_.prefix_gate.busy(job)) {
    if (Status s = session_->skip_pass(); !s.ok()) {
      engine_error_ = s.message();
      return Step::kEngineError;
    }
    if (env_.lease.lost()) return Step::kLost;
    if (env_.stop.reason()) return Step::kStopped;
  }
  env_.prefix_gate.enter(job);
  struct Leave {
    PrefixGate& gate;
    int64_t job;
    ~Leave() { gate.leave(job); }
  } leave{env_.prefix_gate, job};
  auto t0 = Clock::now();
  auto loaded = prefixes_.load(job, env_.model, ids);
  if (!loaded.ok()) {
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

Result<ItemReport> ClassifyRun::stopped(const std::string& reason) {
  nlohmann::json detail = {{"reason", reason},
                           {"note", "a classify item is redone from its prefix"}};
  NJ_ASSIGN_OR_RETURN(bool owned,
                      env_.store.release_item(item_.id, env_.owner, progress(), detail.dump()));
  if (!owned) return lost();
  spdlog::info("{}: stopped ({}); it is redone later", label_, reason);
  return ItemReport{ItemOutcome::kStopped, ItemState::kQueued, reason, 0};
}

Result<ItemReport> ClassifyRun::fail(const std::string& error, bool final) {
  NJ_ASSIGN_OR_RETURN(auto state,
                      env_.store.fail_attempt(item_.id, env_.owner, progress(), error, final));
  if (!state) return lost();
  if (*state == ItemState::kFailed)
    spdlog::error("{}: failed after {} attempts: {}", label_, item_.attempts + 1, error);
  else
    spdlog::warn("{}: attempt failed: {}", label_, error);
  return ItemReport{ItemOutcome::kAttemptFailed, *state, error, 0};
}

ItemReport ClassifyRun::lost() {
  spdlog::warn("{}: the item was cancelled or taken over by another run; leaving it", label_);
  return ItemReport{ItemOutcome::kLostLease, std::nullopt, "lease lost", 0};
}

Result<ItemReport> ClassifyRun::run() {
  auto settings = jobs::classify_settings_from_json(
      nlohmann::json::parse(claim_.job.settings_json, nullptr, false));
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

  auto step_outcome = [&](Step step) -> std::optional<Result<ItemReport>> {
    switch (step) {
      case Step::kOk:
        return std::nullopt;
      case Step::kStopped:
        return stopped(*env_.stop.reason());
      case Step::kLost:
        return lost();
      case Step::kEngineError:
        return fail(engine_error_, engine_error_final_);
    }
    return std::nullopt;
  };
  NJ_ASSIGN_OR_RETURN(Step step, prefix());
  if (auto out = step_outcome(step)) return std::move(*out);
  NJ_ASSIGN_OR_RETURN(step, feed_chunked(item_.prompt_ids, usage_, prefill_s_, "document"));
  if (auto out = step_outcome(step)) return std::move(*out);

  // Logits at the root and at each branching node of the label trie.
  auto t_decode = Clock::now();
  const std::vector<float> root = session_->last_logits();
  std::vector<std::vector<float>> branch(trie->branch_paths().size());
  const auto paths = trie->feed_paths();
  if (!paths.empty()) {
    const SequenceState after_prompt = session_->state();
    for (size_t k = 0; k < paths.size(); ++k) {
      if (k > 0) session_->set_state(after_prompt);
      for (size_t j = 0; j < paths[k].size(); ++j) {
        if (Status s = feed(std::span<const int32_t>(&paths[k][j], 1), usage_, /*decode=*/true);
            !s.ok())
          return fail(s.message(), s.code() == StatusCode::kNonFinite);
        const int b = trie->branch_index(std::span<const int32_t>(paths[k]).first(j + 1));
        if (b >= 0) branch[static_cast<size_t>(b)] = session_->last_logits();
      }
    }
  }
  std::vector<std::span<const float>> rows(branch.begin(), branch.end());
  const jobs::LabelScores scores = trie->score(root, rows);
  decode_s_ += seconds_since(t_decode);
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
                            {"prefix_restore_s", prefix_restore_s_}};
  const std::vector<int32_t>& answer_ids = settings_.label_ids[scores.best];
  NewResult result{"label",
                   static_cast<int64_t>(settings_.prefix_ids.size() + item_.prompt_ids.size()),
                   answer, details.dump(), static_cast<int>(kNumericsVersion)};
  NJ_ASSIGN_OR_RETURN(bool owned,
                      env_.store.finish_item(item_.id, env_.owner, progress(answer_ids), result));
  if (!owned) return lost();
  spdlog::debug("{}: {} (p {:.4f}, margin {:.4f}, {} decode steps)", label_, answer,
                scores.probabilities[scores.best], scores.margin, usage_.decode_steps);
  return ItemReport{ItemOutcome::kDone, ItemState::kDone, "",
                    static_cast<int64_t>(answer_ids.size())};
}

}  // namespace

Result<ItemReport> run_classify_item(const ItemEnv& env, const Claim& claim) {
  ClassifyRun run(env, claim);
  auto report = run.run();
  env.progress.end_item();
  return report;
}

}  // namespace nj::runner
