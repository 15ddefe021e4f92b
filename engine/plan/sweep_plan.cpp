// Sizing a layer sweep's window (see sweep_plan.h).
#include "engine/plan/sweep_plan.h"

#include <algorithm>

#include "engine/sweep/layer_chunks.h"
#include "engine/util/units.h"

namespace nj {

uint64_t layer_state_bytes(const ModelConfig& c, int64_t positions) {
  const uint64_t P = static_cast<uint64_t>(c.kda_width()), D = static_cast<uint64_t>(c.kda_head_dim);
  const uint64_t kda = c.num_kda_layers() > 0 ? static_cast<uint64_t>(c.kda_heads) * D * D +
                                                    static_cast<uint64_t>(c.conv_kernel - 1) * 3 * P
                                              : 0;
  const uint64_t mla = c.num_mla_layers() > 0 ? static_cast<uint64_t>(std::max<int64_t>(1, positions)) *
                                                    static_cast<uint64_t>(c.kv_lora_rank + c.qk_rope)
                                              : 0;
  return 4 * std::max(kda, mla);
}

namespace {

struct WindowCost {
  int rows = 0;
  uint64_t activations = 0, states = 0;
  uint64_t bytes() const { return activations + states; }
};

WindowCost window_cost(const ModelConfig& c, const SweepWork& w, int documents) {
  WindowCost k;
  const int64_t per_doc = w.document_rows + w.branch_rows;
  // The shared start (the job's template prefix) is the window's root, its documents' parent.
  const bool prefix = w.start_rows > 0;
  k.rows = static_cast<int>(per_doc * documents + w.start_rows);
  const int sequences = documents * (1 + w.branches) + (prefix ? 1 : 0);
  const int context = static_cast<int>(w.start_rows + per_doc);
  k.activations =
      sweep_activation_bytes(c, SweepShape{k.rows, w.chunk_rows, sequences, context,
                                           w.logits_rows * documents, w.chunk_sequences});
  // The window holds a bounded number of layer states at once (layer_chunks.h).
  const int depth = (w.branches > 0 ? 1 : 0) + (prefix ? 1 : 0);
  const int live =
      std::min(sequences, LayerChunks::bound(w.chunk_sequences, w.waiting_parents, depth));
  k.states = static_cast<uint64_t>(live) * layer_state_bytes(c, context);
  return k;
}

}  // namespace

Result<SweepWindowPlan> plan_sweep_window(const ModelLayout& layout, uint64_t budget,
                                          const SweepWork& work, const PlanOptions& base) {
  const ModelConfig& c = layout.config();
  SweepWindowPlan p;
  // The weights' own plan holds no sequence state (the window brings its own) and the
  // activations of a prefill pass over the start state's length (a sweep computes the
  // template prefix inside its window; the pass is what --no-prefix-reuse feeds it with, and
  // otherwise goes unused, though the runner's Forward allocates it).
  p.options = base;
  p.options.batch = 1;
  p.options.max_context = static_cast<int>(std::max<int64_t>(1, work.start_rows));
  p.options.all_logits = false;
  p.options.windows = false;
  p.options.sequence_states = 0;
  p.options.draft_tokens = 0;
  const int64_t most = std::max<int64_t>(1, work.documents);
  // The most documents whose window leaves the weights their minimum under `o`.
  auto most_documents = [&](const PlanOptions& o) {
    const uint64_t weights_min = min_memory_for_batch(layout, o, 1);
    int lo = 1, hi = static_cast<int>(std::min<int64_t>(most, 1 << 20));
    if (window_cost(c, work, 1).bytes() + weights_min > budget) return 0;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (window_cost(c, work, mid).bytes() + weights_min <= budget) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  // A ring of one trunk unit: each unit is read only once the previous one is done. A sweep
  // reads a unit once per window and computes it over every row of the window, so the read
  // it no longer overlaps is a small part of the window's time, and the memory of a second
  // slot (K3: 2.35 GB, the size of its dense layer and of its head) holds more documents.
  // Taken only when it does; the least budget is the one-slot ring's.
  PlanOptions one_slot = p.options;
  one_slot.ring_slots = 1;
  const uint64_t one_document = window_cost(c, work, 1).bytes();
  const uint64_t weights_min = min_memory_for_batch(layout, one_slot, 1);
  p.min_memory_bytes = weights_min + one_document;
  int docs = static_cast<int>(std::min<int64_t>(most, 1 << 20));
  if (budget > 0) {
    if (budget < p.min_memory_bytes)
      return resource_exhausted("a layer sweep needs at least " + format_bytes(p.min_memory_bytes) +
                                " for one document of " + std::to_string(work.document_rows) +
                                " rows (weights " + format_bytes(weights_min) + ", the document's " +
                                "activations and states " + format_bytes(one_document) +
                                "); the budget is " + format_bytes(budget));
    const int with_two = most_documents(p.options), with_one = most_documents(one_slot);
    if (with_one > with_two) p.options = one_slot;
    docs = std::max(with_one, with_two);
  }
  const WindowCost k = window_cost(c, work, docs);
  p.documents = docs;
  p.rows = k.rows;
  p.windows = (most + docs - 1) / docs;
  p.activation_bytes = k.activations;
  p.state_bytes = k.states;
  p.weight_budget = budget > 0 ? budget - k.bytes() : 0;
  NJ_ASSIGN_OR_RETURN(p.residency, plan_residency(layout, p.weight_budget, p.options));
  return p;
}

}  // namespace nj
