// Deciding a job's model once (the order of the decisions is in model_plan.h).
#include "engine/runtime/model_plan.h"

#include <algorithm>

#include "engine/plan/sweep_plan.h"
#include "engine/sweep/layer_chunks.h"
#include "engine/sweep/sweep.h"

namespace nj {

uint64_t prompt_sweep_bytes(const ModelConfig& c, int64_t rows) {
  const int n = static_cast<int>(std::max<int64_t>(1, rows));
  const SweepOptions o;
  const int sequences = std::min(n, kPromptSweepSequences);
  const uint64_t buffers = sweep_activation_bytes(
      c, SweepShape{n, o.chunk_rows, sequences, n, sequences, o.chunk_sequences});
  const int live = std::min(sequences, LayerChunks::bound(o.chunk_sequences, o.waiting_parents, 0));
  return buffers + static_cast<uint64_t>(live) * layer_state_bytes(c, n);
}

PlanOptions plan_options_for(bool classify, int64_t context, int prefill_chunk, int io_threads) {
  PlanOptions o;
  o.prefill_chunk = prefill_chunk;
  o.max_context = static_cast<int>(std::max<int64_t>(1, context));
  o.all_logits = !classify;
  o.windows = classify;
  o.sequence_states = classify ? 2 : 1;
  o.io_threads = io_threads;
  return o;
}

int decide_batch(int requested, int max_batch, int64_t items) {
  if (requested > 0) return std::max(1, std::min(requested, max_batch));
  const int64_t fit =
      std::min<int64_t>({max_batch, kMaxDefaultBatch, std::max<int64_t>(1, items)});
  return static_cast<int>(std::max<int64_t>(1, fit));
}

Result<ModelPlan> plan_model(const ModelLayout& layout, const ModelRequest& r) {
  ModelPlan m;
  m.options = plan_options_for(r.classify, r.context, r.prefill_chunk, r.io_threads);
  m.options.bandwidth_gbps = r.bandwidth_gbps;
  m.options.routing = r.routing;
  // Prompts in sweeps only when the weights stream (a sweep saves reads, and a budget that
  // holds every weight beside one item reads none) and the budget holds the window beside
  // one item.
  if (r.prompt_sweep_rows > 0 && r.memory_bytes > 0 &&
      resident_memory_for_batch(layout, m.options, 1) > r.memory_bytes) {
    m.prompt_sweep_rows = r.prompt_sweep_rows;
    m.options.sweep_bytes = prompt_sweep_bytes(layout.config(), r.prompt_sweep_rows);
    if (max_batch_for_budget(layout, m.options, r.memory_bytes) == 0) {
      m.prompt_sweep_rows = 0;
      m.options.sweep_bytes = 0;
    }
  }
  m.requested_batch = r.batch;
  const uint64_t memory = r.memory_bytes;
  if (memory > 0) {
    m.max_batch = max_batch_for_budget(layout, m.options, memory);
    m.batch = m.max_batch > 0 ? decide_batch(r.batch, m.max_batch, r.items) : 1;
  } else {
    m.batch = r.batch > 0 ? r.batch
                          : static_cast<int>(std::clamp<int64_t>(r.items, 1, kDefaultResidentBatch));
    if (r.free_memory_bytes > 0) {
      PlanOptions with_drafts = m.options;  // a resident plan holds every draft asked for
      with_drafts.draft_tokens = r.speculation == Speculation::kNgram ? kRunDraftTokens : 0;
      m.max_batch = max_resident_batch(layout, with_drafts, r.free_memory_bytes);
      m.batch = std::max(1, std::min(m.batch, m.max_batch));
    }
  }
  m.options.batch = m.batch;

  switch (r.speculation) {
    case Speculation::kOff: m.asked_draft_tokens = 0; break;
    case Speculation::kNgram: m.asked_draft_tokens = kRunDraftTokens; break;
    case Speculation::kAuto:  // resident: speculation_pays never holds
      m.asked_draft_tokens = memory > 0 ? kRunDraftTokens : 0;
      break;
  }
  m.options.draft_tokens = m.asked_draft_tokens;

  NJ_ASSIGN_OR_RETURN(m.residency, plan_residency(layout, memory, m.options));
  if (r.speculation == Speculation::kAuto && m.asked_draft_tokens > 0) {
    const bool pays = m.residency.draft_tokens > 0 &&
                      speculation_pays(pass_cost(layout, m.residency), m.residency);
    if (!pays) {
      m.asked_draft_tokens = 0;
      m.options.draft_tokens = 0;
      NJ_ASSIGN_OR_RETURN(m.residency, plan_residency(layout, memory, m.options));
    }
  }
  m.pass_cost = pass_cost(layout, m.residency);
  return m;
}

ActivationShape ModelPlan::activation_shape() const {
  PlanOptions o = options;
  o.draft_tokens = residency.draft_tokens;
  return planned_activation_shape(o);
}

ForwardOptions ModelPlan::forward_options() const {
  const ActivationShape shape = activation_shape();
  ForwardOptions fo{shape.rows, options.batch, options.max_context, false};
  if (residency.draft_tokens > 0) {
    fo.tentative_rows = 1 + residency.draft_tokens;
    fo.tentative_sequences = options.batch;
    fo.kda_rollback = options.kda_rollback;
  }
  return fo;
}

}  // namespace nj
