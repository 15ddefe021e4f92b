// The residency planner: turns a memory budget into where every weight byte lives.
//
// Per decode step the model reads every trunk unit (each layer's non-expert tensors, and
// the head: final norms and lm_head) once for the whole batch, and per MoE layer the union
// of the experts its rows route to (top_k for one sequence). Memory can hold some of that
// between steps. Pinning a trunk unit saves its whole size per step for its size in memory
// (1 byte saved per byte held); an expert-cache slot saves an expert only when the router
// picks it again (about distinct / num_experts per byte held, for uniform routing).
// So the plan fills the budget in that order:
//   1. the minimum: the batch's sequence states and the activations of its largest pass, a
//      ring of two buffers the size of the largest trunk unit (the next unit is read while
//      one computes) and two expert buffers (one reads while one computes): below it the
//      disk would sit idle;
//   2. more expert buffers, up to the experts one decode step of the batch needs
//      (min(E, batch x top_k)), so that a layer's misses are all read at once;
//   3. trunk units kept in memory: pinned (decoded), or, from a lossless pack, held as
//      their stored bytes and decoded on each use (trunk_residency.h chooses, by predicted
//      seconds saved per byte; without a lossless pack: pinned, largest first, since
//      pinning the largest also shrinks the ring);
//   4. speculative decoding's drafts (PlanOptions::draft_tokens): the activations and
//      rollback log of their rows, with as many drafts per sequence as what is left holds
//      (ResidencyPlan::draft_tokens, possibly 0). Drafts come after the trunk so that they
//      never make a pass read more than plain decoding's: a sequence whose drafts are never
//      accepted then pays only the rows it drafts (engine/spec/draft_length.h). Their rows'
//      experts use the expert cache's slots as read buffers;
//   5. expert-cache slots, spread evenly over the MoE layers.
// A lossless pack also needs one staging buffer per I/O thread (a run of stored blocks, up
// to 4 MiB, read before it is decoded into the ring; stored_unit.h): part of the minimum.
// The plan never changes the tokens: only where bytes come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/io/read_pool.h"
#include "engine/model/layout.h"
#include "engine/moe/routing_profile.h"
#include "engine/plan/trunk_residency.h"
#include "engine/util/status.h"

namespace nj {

struct PlanOptions {
  int prefill_chunk = kDefaultPrefillChunk;  // as SessionOptions: activations grow with it
  int max_context =
      4096;  // positions of MLA cache reserved (the state grows 55 KB/position for K3)
  bool all_logits = false;  // a pass keeps logits for every row it computes
  // Sequences decoding together (one row each per decode pass). The budget holds a state
  // for each and activations for a pass of max(prefill_chunk, batch) rows, or with
  // `windows` batch × prefill_chunk rows; the predictions are per step of the whole batch.
  int batch = 1;
  // Classification windows: every sequence of the batch may bring a whole prefill chunk to
  // the same pass, so a window of documents is prefilled together, each weight read once
  // for all of them.
  bool windows = false;
  // Speculative decoding (engine/spec/): a decode pass carries up to 1 + draft_tokens rows
  // per sequence, with their logits, and the rollback log of each (activations.h). The
  // most asked for: the plan holds ResidencyPlan::draft_tokens of them (step 4 above).
  int draft_tokens = 0;
  KdaRollback kda_rollback = kDefaultKdaRollback;
  int sequence_states = 1;  // states held per sequence (a classification keeps the state
                            // after its prompt while it scores labels that share tokens: 2)
  int ring_slots = 2;       // trunk units in memory at once when streaming: one computes while the
                            // others read (2 is the least that overlaps; more reads further ahead)
  int min_expert_buffers = 2;   // expert buffers in the minimum (capped at top_k): how many of a
                                // layer's missing experts can be read at once at the minimum
  double bandwidth_gbps = 2.6;  // device read bandwidth for the predicted seconds per token
  // Lossless packs. Decode rate (decoded bytes per second on one I/O thread) in the cost
  // of holding a unit compressed; 8 GB/s is what the AVX-512 decoder measured here on one
  // core (tests/bench/run_lossless_bench.sh), so the model errs on the side of pinning.
  double decode_gbps = 8.0;
  PinCompressed pin_compressed = PinCompressed::kAuto;  // see trunk_residency.h
  int io_threads = kDefaultIoThreads;  // one staging buffer (one run of stored blocks) each
  // Measured routing of this workload; without it the cache prediction assumes uniform
  // routing (hit rate = slots / num_experts), which real routers usually beat.
  const RoutingProfile* routing = nullptr;
};

struct ResidencyPlan {
  uint64_t budget_bytes = 0;
  uint64_t min_memory_bytes = 0;  // the smallest budget this model runs in with these options
  bool everything_resident = false;

  // Trunk units: 0..layers-1 are the layers, `layers` is the head.
  std::vector<bool> pinned;      // [layers + 1]: decoded bytes kept in memory
  std::vector<bool> held;        // [layers + 1]: stored (lossless) bytes kept, decoded on use
  int ring_slots = 0;            // buffers for streamed trunk units (0 when all are pinned)
  uint64_t ring_slot_bytes = 0;  // the largest streamed unit

  int expert_buffers = 0;  // staging + cache: buffers of one expert each
  uint64_t expert_buffer_bytes = 0;
  std::vector<int> expert_cache_slots;  // [layers]: idle experts a layer may keep (0 for dense)

  int batch = 1;               // sequences per decode pass
  int rows_per_pass = 1;       // the most rows a pass carries (activations are sized for it)
  int draft_tokens = 0;        // drafts per sequence per pass the budget holds (<= asked for)
  int max_batch = 0;           // the largest batch this budget holds (0: not even one)
  uint64_t state_bytes = 0;    // batch x sequence_states x the sequence state at max_context
  uint64_t scratch_bytes = 0;  // the activations of a pass (activations.h), kernels' scratch
  uint64_t staging_bytes = 0;  // lossless: one run of stored blocks per I/O thread (0 otherwise)
  uint64_t pinned_bytes = 0;
  uint64_t held_bytes = 0;
  uint64_t ring_bytes = 0;
  uint64_t expert_pool_bytes = 0;
  uint64_t total_bytes() const {
    return state_bytes + scratch_bytes + staging_bytes + pinned_bytes + held_bytes + ring_bytes +
           expert_pool_bytes;
  }

  // Per decode step of the whole batch (one token for each of `batch` sequences), at
  // steady state: every streamed trunk unit once, and the experts the step's rows need
  // (under uniform routing, a layer's batch of B rows needs E·(1 − (1 − k/E)^B) distinct
  // experts), less what the cache holds.
  uint64_t predicted_trunk_bytes_per_step = 0;
  uint64_t predicted_expert_bytes_per_step = 0;
  uint64_t predicted_bytes_per_step() const {
    return predicted_trunk_bytes_per_step + predicted_expert_bytes_per_step;
  }
  double predicted_distinct_experts = 0;  // per MoE layer per decode step
  // Per decoded token: a step's bytes shared by the batch's sequences.
  uint64_t predicted_trunk_bytes_per_token = 0;
  uint64_t predicted_expert_bytes_per_token = 0;
  uint64_t predicted_bytes_per_token() const {
    return predicted_trunk_bytes_per_token + predicted_expert_bytes_per_token;
  }
  double predicted_expert_hit_rate = 0;  // mean over MoE layers
  bool routing_profile_used = false;
  double bandwidth_gbps = 0;
  double predicted_seconds_per_step = 0;   // the I/O floor: a step's bytes / bandwidth
  double predicted_seconds_per_token = 0;  // per sequence's token: the step's floor / batch
  double predicted_tokens_per_second = 0;  // all sequences together
  // Lossless packs: bytes decoded per step (streamed and held units) and their time at
  // decode_gbps on one thread (overlapped with reads and compute as far as cores allow).
  uint64_t predicted_decode_bytes_per_step = 0;
  double decode_gbps = 0;
  double predicted_decode_seconds_per_step = 0;

  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Bytes of sequence state (KDA S + conv history, MLA cache at max_context, last logits).
uint64_t sequence_state_bytes(const ModelConfig& c, int max_context);

// The activation shape of the passes `o` describes (rows = max(prefill_chunk, batch x (1 +
// draft_tokens))).
ActivationShape planned_activation_shape(const PlanOptions& o);

// The smallest budget a batch of `batch` sequences runs in with options `o` (drafts, which
// only take memory left over, are not part of it).
uint64_t min_memory_for_batch(const ModelLayout& layout, const PlanOptions& o, int batch);

// Expected distinct experts among `rows` rows routed uniformly to top_k of num_experts.
double expected_distinct_experts(int num_experts, int top_k, int rows);

// Plans `budget_bytes` (0 = everything resident). ResourceExhausted naming the minimum, and
// the largest batch that would fit, when the budget is below it.
Result<ResidencyPlan> plan_residency(const ModelLayout& layout, uint64_t budget_bytes,
                                     const PlanOptions& options);

}  // namespace nj
