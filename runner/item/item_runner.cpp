// One item through the engine: resume (checkpoint + verified replay), the token loop with
// grouped commits and periodic checkpoints, graceful stops, failures and the finish.
#include "runner/item/item_runner.h"

#include <algorithm>
#include <utility>
#include <chrono>
#include <cmath>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/ops/numerics.h"
#include "engine/session/logprobs.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/speculative/decode.h"
#include "jobs/chat/chat_reply.h"
#include "jobs/spec/job_spec.h"
#include "runner/item/chunked_feed.h"
#include "runner/item/clock.h"
#include "runner/store/job_label.h"
#include "runner/item/item_end.h"
#include "runner/store/job_kind.h"

namespace nj::runner {
namespace {

bool same_params(const SamplingParams& a, const SamplingParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
         a.seed == b.seed;
}

class ItemRun {
 public:
  ItemRun(const ItemEnv& env, const Claim& claim)
      : env_(env),
        claim_(claim),
        item_(claim.item),
        label_(job_label(claim.job) + " item " + item_.custom_id),
        end_(env, claim, label_),
        prompt_(claim.item.prompt_ids),
        output_(claim.tokens) {
    stored_ = static_cast<int64_t>(output_.size());
  }

  Result<AttemptReport> run();
  // What speculation did in this attempt (nothing when the item did not speculate).
  SpeculationStats speculation() const { return spec_ ? spec_->stats() : SpeculationStats{}; }

 private:
  using Step = FeedStep;

  // The sequence the state consumes: prompt, then output.
  int32_t token_at(int64_t position) const {
    const int64_t p = static_cast<int64_t>(prompt_.size());
    return position < p ? prompt_[static_cast<size_t>(position)]
                        : output_[static_cast<size_t>(position - p)];
  }
  Progress progress() const {
    Progress p{stored_, std::span<const int32_t>(output_).subspan(static_cast<size_t>(stored_)),
               prefill_s_, decode_s_, usage_};
    p.logprobs = pending_logprobs_;
    return p;
  }
  void mark_stored() {
    stored_ = static_cast<int64_t>(output_.size());
    pending_logprobs_.clear();
    prefill_s_ = decode_s_ = 0;
    usage_ = {};
    last_commit_ = Clock::now();
  }
  // Whether the output has ended before max_tokens: a chat reply's end (its end of message
  // or a stop string), else the end-of-sequence token.
  bool output_ended() const {
    if (reply_) return reply_->ended();
    return !output_.empty() && output_.back() == eos_;
  }

  Status read_chat_reply_so_far();
  void fresh_session();
  // session_->feed, adding what the engine did to usage_.
  Status feed(std::span<const int32_t> ids, std::vector<float>* rows, bool decode);
  Result<std::optional<int64_t>> restore();
  Result<Step> catch_up();
  Result<Step> between_chunks();
  bool checkpoint_due() const;
  bool commit_due() const;
  Result<bool> commit();
  Result<bool> checkpoint();
  Result<AttemptReport> stop(const std::string& reason);
  // A failed attempt; `final` fails the item at once (an error every attempt would repeat).
  Result<AttemptReport> fail(const std::string& error, bool final = false);
  Result<AttemptReport> finish();
  // Samples, feeds, commits and checkpoints from the caught-up state to the end of the
  // output (or a stop, a lost lease, a failed attempt); run()'s last step.
  Result<AttemptReport> generate();
  AttemptReport lost();
  // Whether the item speculates: its job's `speculative:` is not off and the batch's plan
  // holds drafts. Errors: an unknown stored mode (the item's attempt fails with it).
  Result<bool> speculates() const;
  // Emits `id` (just sampled from `logits`): output, log-probabilities, chat reply, counters.
  void emit(int32_t id, std::span<const float> logits);
  // Feeds `id` with drafts and emits the accepted ones. Returns whether one ended the output.
  Result<bool> feed_speculative(int32_t id);
  // The stored output came from other arithmetic (another engine numerics version): drops
  // the item's checkpoint unread. Returns false when the lease is gone.
  Result<bool> forget_other_numerics();
  // The replay of another arithmetic's output diverged: restarts the output from the prompt.
  Result<bool> restart_from_prompt(int64_t restored_position);

  const ItemEnv& env_;
  const Claim& claim_;
  const ItemRow& item_;
  std::string label_;
  ItemEnd end_;  // how an attempt ends short of the finish (stop, fail, lost)
  jobs::GenerateParams params_;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> output_;                   // stored tokens, then this attempt's
  int64_t stored_ = 0;                            // output_[0, stored_) is in the store
  std::vector<TokenLogprobs> pending_logprobs_;   // of output_[stored_, end) (if asked for)
  std::unique_ptr<jobs::ChatReplyReader> reply_;  // chat items: reads the output so far
  int64_t generated_now_ = 0;
  double prefill_s_ = 0, decode_s_ = 0;  // engine time not yet recorded in the store
  EngineUsage usage_;                    // engine work not yet recorded in the store
  std::unique_ptr<ItemSession> session_;
  std::unique_ptr<Sampler> sampler_;
  // With speculation (BatchSpeculation): the decode step that feeds drafts with the token
  // just chosen. Made on the final session, once the item has caught up.
  std::optional<SpeculativeDecoder<ItemSession>> spec_;
  std::unique_ptr<ItemCheckpointWriter> writer_;
  int32_t eos_ = -1;                  // the token that ends the output (-1: none)
  int64_t checkpoint_position_ = -1;  // position of the newest checkpoint (-1: none)
  int checkpoint_failures_ = 0;       // saves failed in a row (a full disk): warned once
  Clock::time_point last_checkpoint_ = Clock::now();
  Clock::time_point last_commit_ = Clock::now();
  std::string divergence_;
  bool engine_error_final_ = false;  // the engine error in divergence_ is deterministic
  int64_t fed_prompt_ = 0, fed_replay_ = 0;
  bool numerics_recorded_ = false;  // the store says the output is this arithmetic's
};

// Chat items: the reader of the reply, fed the stored output (a resumed reply may already
// have ended, e.g. at a stop string, with only the finish missing).
Status ItemRun::read_chat_reply_so_far() {
  if (!env_.tokenizer)
    return invalid_argument("a chat item needs the model's tokenizer, and the model has none");
  NJ_ASSIGN_OR_RETURN(jobs::ChatControls controls, jobs::chat_controls(*env_.tokenizer));
  reply_ = std::make_unique<jobs::ChatReplyReader>(*env_.tokenizer, controls, *params_.chat);
  for (int32_t id : output_)
    if (reply_->push(id)) break;
  return Status();
}

void ItemRun::fresh_session() {
  session_ = std::make_unique<ItemSession>(env_.passes, env_.options.prefill_chunk);
  sampler_ = std::make_unique<Sampler>(params_.sampling);
}

Status ItemRun::feed(std::span<const int32_t> ids, std::vector<float>* rows, bool decode) {
  return feed_counted(*session_, ids, rows, decode, usage_);
}

// Restores the item's checkpoint into a fresh session when it is usable: it verifies (the
// engine checks checksums and the model), it holds a prefix of prompt + stored output (the
// file may be newer than its row after a crash between the two; the tokens it consumed
// were committed before it was written), and it was saved with the item's sampling settings.
// An unusable file is removed with a warning; a missing one is normal before the first save.
Result<std::optional<int64_t>> ItemRun::restore() {
  fresh_session();
  const int64_t p = static_cast<int64_t>(prompt_.size());
  const int64_t m = static_cast<int64_t>(output_.size());
  const std::string rel = StateCheckpoints::item_path(item_.id);
  const bool has_row = !claim_.checkpoints.empty();
  auto loaded = env_.checkpoints.load(rel, env_.model);
  std::string problem;
  if (!loaded.ok()) {
    if (loaded.status().code() != StatusCode::kNotFound)
      problem = loaded.status().message();
    else if (has_row)
      problem = "its file is missing: " + loaded.status().message();
  } else {
    const SequenceState& s = loaded->state;
    bool prefix = s.position >= 1 && s.position <= p + m &&
                  static_cast<int64_t>(s.tokens.size()) == s.position;
    for (int64_t i = 0; prefix && i < s.position; ++i)
      prefix = s.tokens[static_cast<size_t>(i)] == token_at(i);
    if (!prefix)
      problem = "its sequence is not a prefix of the item's prompt and stored output";
    else if (!same_params(loaded->params, params_.sampling))
      problem = "it was saved with other sampling settings";
  }
  if (!problem.empty()) {
    spdlog::warn(
        "{}: state checkpoint {} is unusable ({}); prefilling the prompt and {} stored tokens "
        "instead",
        label_, rel, problem, m);
    NJ_RETURN_IF_ERROR(
        env_.store.add_event(claim_.job.id, item_.id, "checkpoint_unusable",
                             nlohmann::json{{"path", rel}, {"error", problem}}.dump()));
    NJ_ASSIGN_OR_RETURN(bool owned, env_.store.drop_checkpoints(item_.id, env_.owner));
    if (!owned) return Status(StatusCode::kCancelled, "lease lost");
    env_.checkpoints.remove_item(item_.id);
    return std::optional<int64_t>();
  }
  if (!loaded.ok()) return std::optional<int64_t>();  // no checkpoint yet
  const int64_t position = loaded->state.position;
  session_->set_state(std::move(loaded->state));
  sampler_->set_rng(loaded->rng);
  checkpoint_position_ = position;
  return std::optional<int64_t>(position);
}

bool ItemRun::checkpoint_due() const {
  const int64_t since = session_->position() - std::max<int64_t>(checkpoint_position_, 0);
  return since >= env_.options.checkpoint_tokens ||
         (since > 0 && seconds_since(last_checkpoint_) >= env_.options.checkpoint_interval_s);
}

bool ItemRun::commit_due() const {
  const int64_t pending = static_cast<int64_t>(output_.size()) - stored_;
  return pending >= env_.options.commit_tokens ||
         (pending > 0 && seconds_since(last_commit_) >= env_.options.commit_interval_s);
}

Result<bool> ItemRun::commit() {
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.append_tokens(item_.id, env_.owner, progress()));
  if (owned) mark_stored();
  return owned;
}

// Stores the pending tokens, writes the state file, then (only once it is durable) its row.
// Tokens first: the file then never holds output the store lacks. A failed file write is
// logged and skipped: the tokens are stored, so nothing is lost.
Result<bool> ItemRun::checkpoint() {
  const int64_t position = session_->position();
  if (stored_ < static_cast<int64_t>(output_.size())) {
    NJ_ASSIGN_OR_RETURN(bool owned, commit());
    if (!owned) return false;
  }
  if (position <= checkpoint_position_ || position == 0) return true;
  last_checkpoint_ = Clock::now();
  if (!writer_) {
    auto w = env_.checkpoints.writer(item_.id);
    if (!w.ok()) {
      if (checkpoint_failures_++ == 0)  // as a failed save below: said once
        spdlog::warn("{}: no state checkpoint: {} (the item goes on; further failures are "
                     "logged at debug level until a save succeeds)",
                     label_, w.status().message());
      else
        spdlog::debug("{}: no state checkpoint: {}", label_, w.status().message());
      return true;
    }
    writer_ = std::move(*w);
  }
  auto t0 = Clock::now();
  auto bytes = writer_->save(env_.model, session_->state(), *sampler_);
  if (!bytes.ok()) {
    // A full disk fails every save until space is freed: one warning, not one per save.
    if (checkpoint_failures_++ == 0)
      spdlog::warn("{}: could not write a state checkpoint: {} (the item goes on; further "
                   "failures are logged at debug level until a save succeeds)",
                   label_, bytes.status().message());
    else
      spdlog::debug("{}: could not write a state checkpoint: {}", label_, bytes.status().message());
    return true;
  }
  if (checkpoint_failures_ > 0)
    spdlog::info("{}: state checkpoint written again after {} failed saves", label_,
                 std::exchange(checkpoint_failures_, 0));
  const std::string rel = StateCheckpoints::item_path(item_.id);
  NewCheckpoint cp{position, static_cast<int64_t>(output_.size()), rel, *bytes};
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.add_checkpoint(item_.id, env_.owner, progress(), cp));
  if (!owned) return false;
  mark_stored();
  checkpoint_position_ = position;
  spdlog::debug("{}: state checkpoint at position {} ({} bytes written in {:.3f} s)", label_,
                position, *bytes, seconds_since(t0));
  return true;
}

// After each chunk of catch-up: stop, lease, checkpoint cadence.
Result<ItemRun::Step> ItemRun::between_chunks() {
  if (Step step = lease_and_stop(env_); step != Step::kOk) return step;
  if (checkpoint_due()) {
    NJ_ASSIGN_OR_RETURN(bool owned, checkpoint());
    if (!owned) return Step::kLost;
  }
  return Step::kOk;
}

// Feeds the prompt tokens the state lacks, then replays the stored output by teacher
// forcing, checking that the sampler draws every stored token again.
Result<ItemRun::Step> ItemRun::catch_up() {
  const int64_t p = static_cast<int64_t>(prompt_.size());
  const int64_t m = static_cast<int64_t>(output_.size());
  const int64_t vocab = env_.model.config().vocab;
  FeedError error;
  auto chunked = [&](const char* what, int64_t offset) {
    return ChunkedFeed{
        *session_, env_.options.prefill_chunk, usage_, prefill_s_, env_.progress, what, offset,
        error};
  };
  auto ended = [&](Step step) {
    if (step == Step::kEngineError) {
      divergence_ = error.message;
      engine_error_final_ = error.final;
    }
    return step;
  };
  const int64_t pos = session_->position();
  if (pos == 0 && p > 0 && p <= env_.options.prompt_sweep_rows) {
    // The whole prompt in the group's next prompt sweep (one read of the weights for the
    // prompts of the items starting together).
    const SequenceUsage before = session_->usage();
    const auto t0 = Clock::now();
    const Status st = session_->sweep_prompt(prompt_, claim_.job.id, item_.id);
    prefill_s_ += seconds_since(t0);
    if (!st.ok()) {
      error = FeedError{st.message(), st.code() == StatusCode::kNonFinite};
      return ended(Step::kEngineError);
    }
    add_usage(before, session_->usage(), /*decode=*/false, usage_);
    fed_prompt_ = p;
    env_.progress.feeding("prompt", p, p);
    if (m > 0) {
      NJ_ASSIGN_OR_RETURN(Step between, between_chunks());
      if (between != Step::kOk) return ended(between);
    }
  }
  if (session_->position() < p) {
    const int64_t fed_before = fed_prompt_;
    NJ_ASSIGN_OR_RETURN(
        Step step, feed_chunks(chunked("prompt", pos),
                               std::span<const int32_t>(prompt_).subspan(static_cast<size_t>(pos)),
                               [&](int64_t fed, std::span<const float>) -> Result<Step> {
                                 fed_prompt_ = fed_before + fed;
                                 if (pos + fed < p || m > 0) return between_chunks();
                                 return Step::kOk;
                               }));
    if (step != Step::kOk) return ended(step);
  }
  std::vector<float> rows;
  auto check = [&](int64_t k, std::span<const float> logits) {
    const int32_t drawn = sampler_->sample(logits);
    if (drawn == output_[static_cast<size_t>(k)]) return true;
    divergence_ = "replay diverged at output token " + std::to_string(k) + ": stored " +
                  std::to_string(output_[static_cast<size_t>(k)]) + ", the model now gives " +
                  std::to_string(drawn);
    return false;
  };
  const int64_t k0 = session_->position() - p;  // output tokens the state has consumed
  if (k0 >= m) return Step::kOk;
  if (!check(k0, session_->last_logits())) return Step::kDiverged;
  int64_t k = k0;  // the first token of the chunk just fed
  NJ_ASSIGN_OR_RETURN(
      Step step,
      feed_chunks(
          chunked("replay", k0), std::span<const int32_t>(output_).subspan(static_cast<size_t>(k0)),
          [&](int64_t fed, std::span<const float> logits) -> Result<Step> {
            const int64_t n = k0 + fed - k;
            fed_replay_ += n;
            for (int64_t r = 0; r + 1 < n; ++r)
              if (!check(k + r + 1, logits.subspan(static_cast<size_t>(r * vocab),
                                                   static_cast<size_t>(vocab))))
                return Step::kDiverged;
            k += n;
            NJ_ASSIGN_OR_RETURN(Step between, between_chunks());
            if (between != Step::kOk) return between;
            if (k < m && !check(k, session_->last_logits())) return Step::kDiverged;
            return Step::kOk;
          },
          &rows));
  return ended(step);
}

Result<AttemptReport> ItemRun::stop(const std::string& reason) {
  const int64_t at_signal = StopControl::tokens_at_signal().value_or(-1);
  NJ_ASSIGN_OR_RETURN(bool owned, checkpoint());
  if (!owned) return lost();
  nlohmann::json detail = {{"tokens_done", output_.size()},
                           {"position", session_->position()},
                           {"checkpoint_position", checkpoint_position_}};
  if (at_signal >= 0) detail["tokens_at_signal"] = at_signal;
  const std::string resumes = " at " + std::to_string(output_.size()) + "/" +
                              std::to_string(params_.max_tokens) + " tokens" +
                              (checkpoint_position_ > 0 ? ", state checkpoint at position " +
                                                              std::to_string(checkpoint_position_)
                                                        : std::string()) +
                              "; it resumes from here";
  return end_.stopped(reason, std::move(detail), progress(), generated_now_, resumes);
}

Result<AttemptReport> ItemRun::fail(const std::string& error, bool final) {
  return end_.failed(error, final, progress(), generated_now_);
}

AttemptReport ItemRun::lost() {
  return end_.lost(generated_now_);
}

Result<bool> ItemRun::forget_other_numerics() {
  nlohmann::json detail = {{"current", kNumericsVersion}, {"tokens_done", output_.size()}};
  detail["stored"] =
      item_.numerics_version ? nlohmann::json(*item_.numerics_version) : nlohmann::json(nullptr);
  spdlog::warn(
      "{}: its {} stored tokens were computed with {} engine numerics (this binary: "
      "version {}); replaying them from the prompt before going on",
      label_, output_.size(),
      item_.numerics_version ? "version " + std::to_string(*item_.numerics_version)
                             : std::string("unrecorded"),
      kNumericsVersion);
  NJ_RETURN_IF_ERROR(
      env_.store.add_event(claim_.job.id, item_.id, "numerics_changed", detail.dump()));
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.drop_checkpoints(item_.id, env_.owner));
  if (!owned) return false;
  env_.checkpoints.remove_item(item_.id);
  return true;
}

Result<bool> ItemRun::restart_from_prompt(int64_t restored_position) {
  const int64_t dropped = static_cast<int64_t>(output_.size());
  spdlog::warn(
      "{}: {}: this arithmetic does not reproduce the stored output; restarting it from "
      "the prompt ({} tokens dropped)",
      label_, divergence_, dropped);
  nlohmann::json detail = {{"error", divergence_},
                           {"dropped_tokens", dropped},
                           {"current", kNumericsVersion},
                           {"checkpoint_position", restored_position}};
  NJ_ASSIGN_OR_RETURN(
      bool owned, env_.store.restart_output(item_.id, env_.owner, kNumericsVersion, detail.dump()));
  if (!owned) return false;
  env_.checkpoints.remove_item(item_.id);
  output_.clear();
  stored_ = 0;
  pending_logprobs_.clear();
  if (params_.chat) NJ_RETURN_IF_ERROR(read_chat_reply_so_far());  // a reader of no reply yet
  StopControl::publish_tokens(0);
  numerics_recorded_ = true;
  fresh_session();
  checkpoint_position_ = -1;
  fed_prompt_ = fed_replay_ = 0;
  return true;
}

Result<bool> ItemRun::speculates() const {
  NJ_ASSIGN_OR_RETURN(const jobs::SpeculativeMode mode, stored_speculative_mode(claim_.job));
  return mode != jobs::SpeculativeMode::kOff && env_.speculation.draft_tokens > 0;
}

void ItemRun::emit(int32_t id, std::span<const float> logits) {
  output_.push_back(id);
  if (params_.logprobs)
    pending_logprobs_.push_back(token_logprobs(logits, id, params_.top_logprobs));
  ++generated_now_;
}

// Accepted drafts are emitted in order, each from the pass's logits row it was drawn from;
// the chat reply reads each as it is verified (a draft that ends the reply ends
// verification). Drafts stop one short of max_tokens: the last token is sampled, never fed.
Result<bool> ItemRun::feed_speculative(int32_t id) {
  const size_t before_tokens = output_.size();
  std::vector<int32_t> accepted;
  auto finishes = [&](int32_t draft) {
    if (reply_) reply_->push(draft);
    return reply_ ? reply_->ended() : draft == eos_;
  };
  const int room = static_cast<int>(params_.max_tokens - static_cast<int64_t>(before_tokens)) - 1;
  const SequenceUsage before = session_->usage();
  auto a = spec_->feed(*sampler_, id, room, finishes, &accepted);
  add_usage(before, session_->usage(), /*decode=*/true, usage_);
  NJ_RETURN_IF_ERROR(a.status());
  const size_t vocab = static_cast<size_t>(env_.model.config().vocab);
  const std::span<const float> rows = spec_->pass_logits();
  for (size_t i = 0; i < accepted.size(); ++i) emit(accepted[i], rows.subspan(i * vocab, vocab));
  usage_.spec_passes += 1;
  usage_.spec_drafted += a->drafted;
  usage_.spec_accepted += a->accepted;
  return a->finished;
}

Result<AttemptReport> ItemRun::finish() {
  NewResult result{output_ended() ? "stop" : "length", static_cast<int64_t>(prompt_.size()),
                   std::nullopt};
  // A complete output of other arithmetic (only its finish was missing) keeps its version.
  if (numerics_recorded_) result.numerics_version = static_cast<int>(kNumericsVersion);
  if (env_.tokenizer) result.output_text = env_.tokenizer->decode(output_);
  NJ_ASSIGN_OR_RETURN(bool owned, env_.store.finish_item(item_.id, env_.owner, progress(), result));
  if (!owned) return lost();
  mark_stored();
  writer_.reset();
  env_.checkpoints.remove_item(item_.id);
  return AttemptReport{ItemOutcome::kDone, ItemState::kDone, "", generated_now_};
}

Result<AttemptReport> ItemRun::run() {
  auto params_json = nlohmann::json::parse(item_.params_json, nullptr, false);
  auto params = jobs::generate_params_from_json(params_json);
  if (!params.ok()) return fail(params.status().message());
  params_ = *params;
  if (prompt_.empty()) return fail("the item has an empty prompt");
  for (int32_t id : prompt_)
    if (id < 0 || id >= env_.model.config().vocab)
      return fail("prompt token id " + std::to_string(id) + " is outside the model's vocabulary");
  if (static_cast<int64_t>(output_.size()) > params_.max_tokens)
    return fail("the store holds more tokens than max_tokens (" + std::to_string(output_.size()) +
                ")");
  StopControl::publish_tokens(static_cast<int64_t>(output_.size()));
  env_.progress.begin_item(label_, static_cast<int64_t>(output_.size()), params_.max_tokens);

  eos_ = env_.tokenizer && !params_.ignore_eos ? env_.tokenizer->eos_id() : -1;
  if (params_.chat)
    if (Status s = read_chat_reply_so_far(); !s.ok()) return fail(s.message());
  // Every token stored, only the finish missing (a crash between the two).
  if (static_cast<int64_t>(output_.size()) == params_.max_tokens || output_ended()) return finish();
  // Output stored by other arithmetic (docs/design/jobs.md, "Engine numerics version"): its checkpoint is
  // never restored; the tokens are replayed from the prompt and kept only if this arithmetic
  // draws every one of them again, else the output restarts from the prompt.
  const bool other_numerics =
      !output_.empty() && item_.numerics_version != static_cast<int>(kNumericsVersion);
  if (other_numerics) {
    NJ_ASSIGN_OR_RETURN(bool owned, forget_other_numerics());
    if (!owned) return lost();
  }
  numerics_recorded_ = item_.numerics_version == static_cast<int>(kNumericsVersion);
  auto restored =
      other_numerics ? Result<std::optional<int64_t>>(std::optional<int64_t>()) : restore();
  if (other_numerics) fresh_session();
  if (!restored.ok()) {
    if (restored.status().code() == StatusCode::kCancelled) return lost();
    return restored.status();
  }
  const int64_t restored_position = restored->value_or(0);
  NJ_ASSIGN_OR_RETURN(Step step, catch_up());
  if (step == Step::kDiverged && *restored) {
    spdlog::warn("{}: {} after the checkpoint at position {}; prefilling from the start instead",
                 label_, divergence_, restored_position);
    NJ_RETURN_IF_ERROR(env_.store.add_event(
        claim_.job.id, item_.id, "replay_diverged",
        nlohmann::json{{"error", divergence_}, {"checkpoint_position", restored_position}}.dump()));
    NJ_ASSIGN_OR_RETURN(bool owned, env_.store.drop_checkpoints(item_.id, env_.owner));
    if (!owned) return lost();
    env_.checkpoints.remove_item(item_.id);
    fresh_session();
    checkpoint_position_ = -1;
    fed_prompt_ = fed_replay_ = 0;
    NJ_ASSIGN_OR_RETURN(step, catch_up());
  }
  if (step == Step::kDiverged && other_numerics) {
    NJ_ASSIGN_OR_RETURN(bool owned, restart_from_prompt(restored_position));
    if (!owned) return lost();
    NJ_ASSIGN_OR_RETURN(step, catch_up());
  }
  switch (step) {
    case Step::kOk:
      break;
    case Step::kDiverged:
      return fail(divergence_ + " (the stored output cannot be reproduced)");
    case Step::kEngineError:
      return fail(divergence_, engine_error_final_);
    case Step::kLost:
      return lost();
    case Step::kStopped:
      return stop(*env_.stop.reason());
  }
  if (claim_.item.claims > 1 || !output_.empty() || *restored) {
    const char* from = *restored ? "checkpoint" : "start";
    NJ_RETURN_IF_ERROR(
        env_.store.add_event(claim_.job.id, item_.id, "resumed",
                             nlohmann::json{{"from", from},
                                            {"checkpoint_position", restored_position},
                                            {"prompt_tokens_fed", fed_prompt_},
                                            {"replayed_tokens", fed_replay_},
                                            {"tokens_done", output_.size()}}
                                 .dump()));
    spdlog::info("{}: resumed at {}/{} tokens from {} (fed {} prompt tokens, replayed {})", label_,
                 output_.size(), params_.max_tokens,
                 *restored ? "the checkpoint at position " + std::to_string(restored_position)
                           : std::string("the start"),
                 fed_prompt_, fed_replay_);
  }

  if (!numerics_recorded_) {  // a fresh item, or another arithmetic's output replayed exactly
    NJ_ASSIGN_OR_RETURN(bool owned, env_.store.set_numerics_version(
                                        item_.id, env_.owner, static_cast<int>(kNumericsVersion)));
    if (!owned) return lost();
    numerics_recorded_ = true;
  }

  return generate();
}

Result<AttemptReport> ItemRun::generate() {
  auto speculate = speculates();
  if (!speculate.ok()) return fail(speculate.status().message(), /*final=*/true);
  if (*speculate) {
    DraftLengthOptions dl;
    dl.max_draft_tokens = env_.speculation.draft_tokens;
    spec_.emplace(*session_, Speculator(std::make_unique<NgramDrafter>(), dl),
                  env_.speculation.cost);
  }

  // The token loop. The state has consumed prompt + output; last_logits predicts the next.
  // With speculation a pass also feeds drafts, and verification emits exactly the tokens
  // this loop would emit one pass each (engine/speculative/decode.h): after every pass the state,
  // the sampler and the output are plain decoding's, so commits and checkpoints are too.
  while (static_cast<int64_t>(output_.size()) < params_.max_tokens) {
    auto t0 = Clock::now();
    const int32_t id = sampler_->sample(session_->last_logits());
    emit(id, session_->last_logits());
    if (reply_) reply_->push(id);
    StopControl::publish_tokens(static_cast<int64_t>(output_.size()));
    if (static_cast<int64_t>(output_.size()) == params_.max_tokens || output_ended()) {
      decode_s_ += seconds_since(t0);
      break;  // the last token needs no forward pass
    }
    Status s;
    bool ended = false;
    if (spec_) {
      auto fed = feed_speculative(id);
      if (fed.ok()) ended = *fed;
      s = fed.status();
    } else {
      const int32_t next[1] = {id};
      s = feed(next, nullptr, /*decode=*/true);
    }
    decode_s_ += seconds_since(t0);
    if (!s.ok()) return fail(s.message(), s.code() == StatusCode::kNonFinite);
    StopControl::publish_tokens(static_cast<int64_t>(output_.size()));
    if (ended) break;  // a draft ended the output: plain decoding would not feed it either
    env_.progress.tokens(static_cast<int64_t>(output_.size()), params_.max_tokens);
    if (env_.lease.lost()) return lost();
    if (auto reason = env_.stop.reason()) return stop(*reason);
    if (checkpoint_due()) {
      NJ_ASSIGN_OR_RETURN(bool owned, checkpoint());
      if (!owned) return lost();
    } else if (commit_due()) {
      NJ_ASSIGN_OR_RETURN(bool owned, commit());
      if (!owned) return lost();
    }
  }
  return finish();
}

}  // namespace

Status feed_counted(ItemSession& session, std::span<const int32_t> ids, std::vector<float>* rows,
                    bool decode, EngineUsage& usage) {
  const SequenceUsage before = session.usage();
  Status s = session.feed(ids, rows);
  add_usage(before, session.usage(), decode, usage);
  return s;
}

void add_usage(const SequenceUsage& before, const SequenceUsage& after, bool decode,
               EngineUsage& usage) {
  usage.io_wait_s += after.wait_s - before.wait_s;
  usage.compute_s += after.compute_s - before.compute_s;
  usage.bytes_read += static_cast<uint64_t>(std::llround(after.bytes_read - before.bytes_read));
  usage.tokens_fed += static_cast<int64_t>(after.tokens - before.tokens);
  usage.max_batch = std::max<int64_t>(usage.max_batch, after.max_batch);
  if (decode) ++usage.decode_steps;
}

Result<AttemptReport> run_item(const ItemEnv& env, const Claim& claim) {
  ItemRun run(env, claim);
  auto report = run.run();
  if (report.ok()) report->speculation = run.speculation();
  env.progress.end_item();
  return report;
}

}  // namespace nj::runner
