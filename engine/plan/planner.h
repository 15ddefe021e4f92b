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
//      disk would sit idle. A streamed head larger than the largest layer (K3's lm_head is
//      1.9x its largest layer) is read in parts of lm_head's rows no larger than a layer
//      (streamed_head_parts), so that the ring's slots hold a layer, not the head;
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
//      accepted then pays only the rows it drafts (engine/speculative/draft_length.h). Their rows'
//      experts use the expert cache's slots as read buffers;
//   5. expert-cache slots, spread evenly over the MoE layers.
// A lossless pack also needs one staging buffer per I/O thread (a run of stored blocks, up
// to 4 MiB, read before it is decoded into the ring; stored_unit.h): part of the minimum.
// The plan never changes the tokens: only where bytes come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/io/read_pool.h"
#include "engine/model/layout.h"
#include "engine/moe/routing_profile.h"
#include "engine/plan/trunk_residency.h"
#include "engine/weights/residency_plan.h"
#include "engine/util/status.h"

namespace nj {

// The most drafts per sequence per pass speculative decoding plans for (its draft length
// adapts below it, engine/speculative/draft_length.h). Past ~8 even an oracle gains little
// at K3's shapes: each extra row adds its experts (E(k) saturates at 1/(1-a) while the cost
// keeps growing).
inline constexpr int kMaxDraftTokens = 8;

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
  // Speculative decoding (engine/speculative/): a decode pass carries up to 1 + draft_tokens rows
  // per sequence, with their logits, and the rollback log of each (activations.h). The
  // most asked for: the plan holds ResidencyPlan::draft_tokens of them (step 4 above).
  int draft_tokens = 0;
  KdaRollback kda_rollback = kDefaultKdaRollback;
  int sequence_states = 1;  // states held per sequence (a classification keeps the state
                            // after its prompt while it scores labels that share tokens: 2;
                            // a layer sweep holds its own, engine/plan/sweep_plan.h: 0)
  int ring_slots = 2;       // trunk units in memory at once when streaming: one computes while the
                            // others read (2 is the least that overlaps; more reads further ahead;
                            // 1 reads each unit only once the previous one is done: a layer sweep,
                            // whose compute per unit dwarfs its read, takes it to hold more rows)
  // Whether the Forward runs passes: a layer sweep's plan runs none (engine/plan/sweep_plan.h;
  // the Forward allocates its pass buffers at its first pass, so none are held).
  bool passes = true;
  // A layer sweep's buffers held beside the pass buffers: generate prompts swept before the
  // passes decode them (engine/runtime/model_plan.h, prompt_sweep_bytes). Counted as activations.
  uint64_t sweep_bytes = 0;
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

// The head read in parts no larger than the largest layer's buffer when it is streamed
// (layout.h, split_head): 1 when it is no larger, or packed (read and checked whole).
inline constexpr int kMaxHeadParts = 64;
int streamed_head_parts(const ModelLayout& layout);
// A ring slot for one part of the streamed head (its whole buffer with one part).
uint64_t streamed_head_slot_bytes(const ModelLayout& layout);

// Bytes of sequence state (KDA S + conv history, MLA cache at max_context, last logits).
uint64_t sequence_state_bytes(const ModelConfig& c, int max_context);

// The activation shape of the passes `o` describes (rows = max(prefill_chunk, batch x (1 +
// draft_tokens))).
ActivationShape planned_activation_shape(const PlanOptions& o);

// The smallest budget a batch of `batch` sequences runs in with options `o` (drafts, which
// only take memory left over, are not part of it).
uint64_t min_memory_for_batch(const ModelLayout& layout, const PlanOptions& o, int batch);

// The largest batch whose minimum fits `budget` with options `o` (0 when not even one does):
// what a plan's max_batch reports, without planning.
int max_batch_for_budget(const ModelLayout& layout, const PlanOptions& o, uint64_t budget);

// The memory a batch of `batch` sequences takes with everything resident (a plan of budget
// 0 with options `o`): every weight, the batch's states and the activations of its passes.
uint64_t resident_memory_for_batch(const ModelLayout& layout, const PlanOptions& o, int batch);

// The largest batch whose resident memory fits `free_bytes` (0 when not even one does): the
// cap of a batch without a budget, so that it never asks for more than the machine has.
int max_resident_batch(const ModelLayout& layout, const PlanOptions& o, uint64_t free_bytes);

// Expected distinct experts among `rows` rows routed uniformly to top_k of num_experts.
double expected_distinct_experts(int num_experts, int top_k, int rows);
// The same for MoE layer `layer` of a model of config `c`: from `routing`'s recorded choices
// when it has that layer's (RoutingProfile::expected_distinct), else uniform.
double expected_distinct_experts(const ModelConfig& c, const RoutingProfile* routing, int layer,
                                 int rows);

// Plans `budget_bytes` (0 = everything resident). ResourceExhausted naming the minimum, and
// the largest batch that would fit, when the budget is below it.
Result<ResidencyPlan> plan_residency(const ModelLayout& layout, uint64_t budget_bytes,
                                     const PlanOptions& options);

// How many times plan_residency ran in this process (tests count the plans of an open).
uint64_t plan_residency_calls();

}  // namespace nj
