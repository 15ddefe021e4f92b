// A Session runs the K3 forward pass for one sequence (k3-model.md §2): prefill of many
// tokens per pass over the weights, and single-token decode, carrying the sequence state.
//
// Feeding tokens in one call or one at a time gives bit-identical logits: every matrix
// product computes each (row, token) pair the same way, and the recurrent parts (KDA,
// MLA) process tokens in order with the same per-token arithmetic.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/model.h"
#include "engine/moe/routing_profile.h"
#include "engine/state/sequence_state.h"

namespace nj {

struct SessionOptions {
  // Tokens per prefill pass. Each pass reads every trunk layer once and each needed expert
  // once, so larger chunks read less per token; scratch memory grows linearly with it.
  int prefill_chunk = 64;
  // Record which experts each pass requests (RoutingProfile), for `plan --routing-profile`.
  bool record_routing = false;
};

// Timings and counts of the work a session did.
struct ForwardStats {
  uint64_t tokens = 0;        // tokens fed
  uint64_t passes = 0;        // forward passes (prefill chunks + decode steps)
  double compute_s = 0;       // time in kernels (excluding waits for weights)
  double wait_s = 0;          // time blocked on the weight source
  uint64_t expert_computations = 0;  // (expert, chunk) pairs computed
};

// An upper bound of the scratch memory a Session allocates for chunks of `chunk` tokens
// (every buffer at its largest), counting [chunk][vocab] logits when `all_logits`, and
// per-head score rows for `max_context` positions. The residency planner reserves it.
uint64_t estimate_session_scratch_bytes(const ModelConfig& c, int chunk, int max_context, bool all_logits);

// Not thread-safe: one call at a time. The model must outlive the session.
class Session {
 public:
  explicit Session(Model& model, SessionOptions options = {});
  ~Session();

  // Consumes `ids` (any number). Afterwards last_logits() holds the logits after the final
  // id. When `all_logits` is given it receives [ids.size()][vocab] logits, one row per id.
  // On error the state is unchanged only if nothing was consumed; callers treat an error
  // as fatal for the sequence (restore a checkpoint to continue). Logits that are not all
  // finite are an error (NonFinite, "non-finite logits at position P", P the 0-based
  // position of the token after which they were computed), never handed on to be sampled.
  Status feed(std::span<const int32_t> ids, std::vector<float>* all_logits = nullptr);

  const std::vector<float>& last_logits() const { return state_.last_logits; }
  int64_t position() const { return state_.position; }
  const SequenceState& state() const { return state_; }
  // Replaces the state (restore from a checkpoint). REQUIRES: shaped for this model.
  void set_state(SequenceState state) { state_ = std::move(state); }
  Model& model() { return model_; }
  const ForwardStats& stats() const { return stats_; }
  // Empty unless SessionOptions::record_routing.
  const RoutingProfile& routing_profile() const { return routing_; }

 private:
  struct Workspace;
  Status forward_chunk(std::span<const int32_t> ids, float* logits_out, bool all_positions);

  Model& model_;
  SessionOptions options_;
  SequenceState state_;
  std::unique_ptr<Workspace> ws_;
  ForwardStats stats_;
  RoutingProfile routing_;
};

}  // namespace nj
