// The K3 forward pass over a batch (k3-model.md §2, batch.h): one pass reads every trunk
// layer once and each expert any row routes to once, and advances every sequence of the
// batch by its new tokens. Session (session.h) is the one-sequence convenience on top.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/model/config.h"
#include "engine/weights/weight_source.h"
#include "engine/moe/routing_profile.h"

namespace nj {

struct ForwardOptions {
  // The shape the activations are allocated for at the first pass (the planner reserves the
  // same; a Forward that never runs a pass holds none); a larger pass grows them to its own.
  int max_rows = kDefaultPrefillChunk;
  int max_sequences = 1;
  // Positions one sequence may reach: the MLA scratch and each sequence's caches are
  // reserved for it (past it they grow geometrically).
  int max_context = 1;
  // Record which experts each pass requests (RoutingProfile), for `plan --routing-profile`.
  bool record_routing = false;
  // Rows a tentative step may carry (1 + drafted tokens; 0 without speculation): the
  // rollback log is reserved for it up front (the planner counts the same).
  int tentative_rows = 0;
  // How tentative steps keep KDA undoable (activations.h); never changes a result.
  KdaRollback kda_rollback = kDefaultKdaRollback;
  // Tentative steps one pass may carry (a batch whose sequences all speculate: its batch),
  // reserved up front as the planner counts them (planned_activation_shape); with
  // tentative_rows > 0, at least 1.
  int tentative_sequences = 1;
};

// Totals over the passes a Forward ran.
struct ForwardStats {
  uint64_t tokens = 0;               // rows computed (tokens fed, over all sequences)
  uint64_t passes = 0;               // forward passes
  double compute_s = 0;              // time in kernels (excluding waits for weights)
  double wait_s = 0;                 // time blocked on the weight source
  uint64_t expert_computations = 0;  // (expert, pass) pairs computed
  int max_sequences = 0;             // the most sequences one pass carried
  uint64_t sequence_passes = 0;   // Σ sequences per pass (mean batch = sequence_passes / passes)
  uint64_t distinct_experts = 0;  // Σ over passes and MoE layers of the experts a pass needed
  uint64_t moe_layer_passes = 0;  // (MoE layer, pass) pairs: the mean's denominator
};

// What one pass did.
struct PassStats {
  int sequences = 0;
  int rows = 0;
  double compute_s = 0;
  double wait_s = 0;
  uint64_t trunk_bytes_read = 0;  // trunk and head bytes read from disk during the pass
  uint64_t expert_bytes_read = 0;
  uint64_t other_bytes_read = 0;  // embedding rows
  uint64_t bytes_read() const { return trunk_bytes_read + expert_bytes_read + other_bytes_read; }
  uint64_t expert_computations = 0;
  std::vector<int> distinct_experts;  // [layers]: experts the pass needed (0 for dense layers)
};

// Not thread-safe: one pass at a time. The config and the weight source (an opened model's,
// engine/runtime/model.h) must outlive it; several Forwards may share them only if they never
// run at the same time.
class Forward {
 public:
  Forward(const ModelConfig& config, WeightSource& weights, ForwardOptions options = {});
  ~Forward();

  // Runs one pass over `steps`, advancing each step's state by its ids and writing the
  // logits it asked for. Each sequence's results are bit-identical to running it alone.
  // InvalidArgument (nothing consumed) for an empty step, a state shaped for another model,
  // the same state twice, kAll without a destination, or an id outside the vocabulary.
  // NonFinite ("non-finite logits at position P", P the 0-based position of the token the
  // logits follow) when any logits asked for hold a NaN or an infinity: never handed on to
  // be sampled. On any other error the steps' states are unspecified: callers treat it as
  // fatal for those sequences (restore a checkpoint to continue).
  // Tentative steps (batch.h) leave their states unsettled until keep(); FailedPrecondition
  // (nothing consumed) while a tentative step of the previous pass is still unsettled.
  Status run(std::span<SeqStep> steps);

  // Settles a tentative step of the last pass on its first `rows` rows: the state is then
  // bit for bit what feeding only those tokens would have left (position, tokens, caches,
  // recurrent state, and last_logits those after its row rows-1). InvalidArgument when
  // `state` was not a tentative step of the last pass, or rows is outside 1..its rows.
  Status keep(SequenceState& state, int rows);

  const PassStats& last_pass() const { return last_; }
  const ForwardStats& stats() const { return stats_; }
  // Empty unless ForwardOptions::record_routing.
  const RoutingProfile& routing_profile() const { return routing_; }
  const Activations& activations() const { return acts_; }
  const ModelConfig& config() const { return config_; }
  WeightSource& weights() { return weights_; }

 private:
  Status validate(std::span<SeqStep> steps) const;
  // A tentative step of the last pass, waiting for keep().
  struct Unsettled {
    SequenceState* state;
    int slot;            // index among the pass's tentative steps (its rollback log)
    int64_t position0;   // its position before the pass
    int rows;            // rows it fed
    size_t logits_row0;  // its first row in acts_.stream.logits
  };
  void reserve_context(const ModelConfig& c, SequenceState& st, int64_t needed) const;

  const ModelConfig& config_;
  WeightSource& weights_;
  ForwardOptions options_;
  Activations acts_;
  bool acts_allocated_ = false;  // the planned shape, at the first pass
  std::vector<int32_t> ids_;  // the pass's ids, end to end
  std::vector<SeqRows> layer_rows_;
  std::vector<Unsettled> unsettled_;
  ForwardStats stats_;
  PassStats last_;
  RoutingProfile routing_;
};

}  // namespace nj
