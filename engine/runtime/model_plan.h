// Deciding a job's model once: from what a job asks (its model's layout, a budget, its kind,
// its longest context, a batch or "as many as fit", how many items could share a batch, and
// speculation) to the one plan that opening the model, its Forward, `run`, `plan SPEC`,
// `status`'s ETA, `generate --prompts-file` and `submit`'s check all use. Nothing downstream
// plans again: Model::open takes the ModelPlan as it is.
//
// The decisions, in order:
//   1. The plan options of the job's kind: a generation keeps a logits row per replayed token;
//      a classification wants only its last row's, keeps a second state (the one after its
//      prompt) while it scores labels that share tokens, and prefills documents in windows.
//   2. The batch: what was asked (reduced to what the budget holds), else the largest batch
//      the budget holds, at most kMaxDefaultBatch and at most the items that could share it
//      (a budget reserved for sequences that never come would only hold fewer weights); with
//      everything resident, min(items, kDefaultResidentBatch) unless asked, and never more
//      than the machine's free memory holds (ModelRequest::free_memory_bytes, when given).
//   3. Drafts per sequence (speculative decoding): ngram asks for kRunDraftTokens; auto asks
//      for them when speculation pays at this budget (pass_cost.h: the weights stream and one
//      draft breaks even below 50 % acceptance; never when resident); off asks for none. The
//      plan holds as many as memory left over allows (planner.h, step 4), possibly none.
//   4. The residency plan for all of it: plan_residency runs once (twice only for `auto`
//      under a budget when speculation turns out not to pay: the plan without drafts then
//      differs in its cache slots).
#pragma once

#include <cstdint>

#include "engine/forward/activations.h"
#include "engine/forward/forward.h"
#include "engine/model/layout.h"
#include "engine/plan/pass_cost.h"
#include "engine/plan/planner.h"
#include "engine/util/status.h"

namespace nj {

// The batch of a resident model (no budget bounds it): enough rows to make the matrix
// products compute-bound, few enough to keep a pass short.
inline constexpr int kDefaultResidentBatch = 16;
// The largest batch chosen without --batch under a budget (each item of a batch has a
// thread; a larger --batch is honoured when the budget holds it).
inline constexpr int kMaxDefaultBatch = 64;
// The most drafts per sequence per pass planned for a speculating generation; each
// sequence's draft length adapts below it (engine/speculative/draft_length.h).
inline constexpr int kRunDraftTokens = kMaxDraftTokens;

enum class Speculation { kOff, kNgram, kAuto };

// What a job asks of its model.
struct ModelRequest {
  uint64_t memory_bytes = 0;  // the budget; 0 = everything resident
  bool classify = false;      // a classification's plan (decision 1)
  int64_t context = 1;        // the job's longest sequence, in positions
  int batch = 0;              // sequences per pass; 0 = decide (decision 2)
  int64_t items = 1;          // items that could share a batch (bounds the decided batch)
  // Everything resident (no budget): the memory the machine has free (sysinfo.h,
  // free_memory_bytes); the batch is cut to what it holds (max_resident_batch). 0: no cut.
  uint64_t free_memory_bytes = 0;
  Speculation speculation = Speculation::kOff;
  int prefill_chunk = kDefaultPrefillChunk;  // rows a prompt's pass carries at most
  int io_threads = kDefaultIoThreads;        // one staging buffer each (lossless packs)
  double bandwidth_gbps = PlanOptions{}.bandwidth_gbps;  // for the predicted seconds
  // Measured routing (`plan --routing-profile`; outlives the plans made from it): the expert
  // cache's hits and a pass's distinct experts from it rather than uniform routing.
  const RoutingProfile* routing = nullptr;
  // A generation whose prompts may go through layer sweeps (run --schedule auto or sweep): its
  // longest prompt, in tokens. Under a budget whose weights stream and that holds it beside one
  // item, the plan holds a prompt window of that many rows beside the pass buffers
  // (prompt_sweep_bytes; ModelPlan::prompt_sweep_rows). 0: prompts are fed in passes.
  int64_t prompt_sweep_rows = 0;
};

// Prompts of a generation swept together, at most: a window holds this many prompts (and at
// most ModelPlan::prompt_sweep_rows rows), each asking for its last row's logits.
inline constexpr int kPromptSweepSequences = 8;
// Whether a prompt of `next` rows joins a prompt window holding `prompts` prompts of `rows`
// rows, of at most `window_rows` rows (the run's windows and the plan's replay both ask this).
inline bool joins_prompt_window(int prompts, int64_t rows, int64_t next, int64_t window_rows) {
  return prompts == 0 || (prompts < kPromptSweepSequences && rows + next <= window_rows);
}

// What a prompt window of `rows` rows and up to kPromptSweepSequences prompts holds: its
// sweep's buffers (sweep_activation_bytes) and the layer states alive at once (their final
// states are the batch's own, counted with it).
uint64_t prompt_sweep_bytes(const ModelConfig& c, int64_t rows);

struct ModelPlan {
  PlanOptions options;       // what the plan was made for (batch and drafts asked included)
  ResidencyPlan residency;   // where every weight byte lives
  int batch = 1;             // sequences per pass (= options.batch)
  int requested_batch = 0;   // ModelRequest::batch, for a warning when the budget cut it
  int max_batch = 0;         // the largest batch the budget holds (resident: the largest
                             // free_memory_bytes holds; 0 when resident without it)
  int asked_draft_tokens = 0;  // drafts asked (decision 3); residency.draft_tokens are held
  PassCost pass_cost;        // the byte cost of a pass under this plan (speculation weighs it)
  int64_t prompt_sweep_rows = 0;  // a prompt window's rows (ModelRequest::prompt_sweep_rows)

  // The activation shape a pass of this plan needs (with drafts: 1 + draft_tokens rows of
  // every sequence beside the prefill chunks), and the Forward options that allocate it.
  ActivationShape activation_shape() const;
  ForwardOptions forward_options() const;
};

// The plan options of a job's kind (decision 1) for `context` positions.
PlanOptions plan_options_for(bool classify, int64_t context, int prefill_chunk, int io_threads);

// Decision 2 alone: `requested` (0 = decide) under a budget holding `max_batch`, for `items`.
int decide_batch(int requested, int max_batch, int64_t items);

// Decisions 1-4 for a model of `layout`. Errors: the planner's (ResourceExhausted naming the
// minimum when the budget does not hold one sequence).
Result<ModelPlan> plan_model(const ModelLayout& layout, const ModelRequest& request);

}  // namespace nj
