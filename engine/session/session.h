// A Session runs one sequence through the model: prefill of many tokens per pass, and
// single-token decode, carrying the sequence state. It is the one-sequence convenience on
// top of Forward (forward.h), which runs batches of sequences.
//
// Feeding tokens in one call or one at a time gives bit-identical logits: every matrix
// product computes each (row, token) pair the same way, and the recurrent parts (KDA,
// MLA) process tokens in order with the same per-token arithmetic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward/batch.h"
#include "engine/forward/forward.h"
#include "engine/runtime/model.h"
#include "engine/state/sequence_state.h"

namespace nj {

struct SessionOptions {
  // Tokens per prefill pass (see kDefaultPrefillChunk).
  int prefill_chunk = kDefaultPrefillChunk;
  // Record which experts each pass requests (RoutingProfile), for `plan --routing-profile`.
  bool record_routing = false;
  // Rows of a tentative pass (feed_tentative) reserved up front; 0 without speculation.
  int tentative_rows = 0;
  KdaRollback kda_rollback = kDefaultKdaRollback;
};

// Not thread-safe: one call at a time. The model must outlive the session.
class Session {
 public:
  explicit Session(Model& model, SessionOptions options = {});

  // Consumes `ids` (any number), in passes of at most prefill_chunk tokens. Afterwards
  // last_logits() holds the logits after the final id. When `all_logits` is given it
  // receives [ids.size()][vocab] logits, one row per id. On error the state is unchanged
  // only if nothing was consumed; callers treat an error as fatal for the sequence
  // (restore a state checkpoint to continue). Logits that are not all finite are an error
  // (NonFinite, from Forward::run), never handed on to be sampled.
  Status feed(std::span<const int32_t> ids, std::vector<float>* all_logits = nullptr);

  // Speculative verification (batch.h): feeds `ids` in one tentative pass, `all_logits`
  // receiving [ids.size()][vocab]; the state is unsettled until keep(rows) settles it on the
  // first `rows` ids. Errors as feed; keep's as Forward::keep.
  Status feed_tentative(std::span<const int32_t> ids, std::vector<float>* all_logits);
  Status keep(int rows) { return forward_.keep(state_, rows); }

  const std::vector<float>& last_logits() const { return state_.last_logits; }
  int64_t position() const { return state_.position; }
  const SequenceState& state() const { return state_; }
  // Replaces the state (restore from a state checkpoint). REQUIRES: shaped for this model.
  void set_state(SequenceState state) { state_ = std::move(state); }
  Model& model() { return model_; }
  const ModelConfig& config() const { return model_.config(); }
  const ForwardStats& stats() const { return forward_.stats(); }
  // Empty unless SessionOptions::record_routing.
  const RoutingProfile& routing_profile() const { return forward_.routing_profile(); }

 private:
  Model& model_;
  SessionOptions options_;
  Forward forward_;
  SequenceState state_;
};

}  // namespace nj
