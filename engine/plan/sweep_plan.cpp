// Sizing a layer sweep's window (see sweep_plan.h).
#include "engine/plan/sweep_plan.h"

#include <algorithm>
#include <limits>

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

// A window of `documents` documents of `document_rows` rows in all, the longest `longest`.
WindowCost window_cost(const ModelConfig& c, const SweepWork& w, int documents,
                       int64_t document_rows, int64_t longest) {
  WindowCost k;
  // The shared start (the job's template prefix) is the window's root, its documents' parent.
  const bool prefix = w.start_rows > 0;
  k.rows = static_cast<int>(document_rows + w.branch_rows * documents + w.start_rows);
  const int sequences = documents * (1 + w.branches) + (prefix ? 1 : 0);
  const int context = static_cast<int>(w.start_rows + longest + w.branch_rows);
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

// A window of `documents` documents, each as long as the job's longest.
WindowCost window_cost(const ModelConfig& c, const SweepWork& w, int documents) {
  return window_cost(c, w, documents, w.document_rows * documents, w.document_rows);
}

}  // namespace

uint64_t sweep_window_bytes(const ModelConfig& c, const SweepWork& work, int documents,
                            int64_t document_rows, int64_t longest) {
  return window_cost(c, work, documents, document_rows, longest).bytes();
}

SweepWindowFill::SweepWindowFill(const ModelConfig& c, const SweepWork& work, uint64_t window_bytes,
                                 int max_documents)
    : config_(&c),
      work_(work),
      window_bytes_(window_bytes),
      max_documents_(std::max(1, max_documents)) {}

bool SweepWindowFill::fits(int64_t document_rows) const {
  if (documents_ == 0) return true;
  if (documents_ >= max_documents_) return false;
  return sweep_window_bytes(*config_, work_, documents_ + 1, rows_ + document_rows,
                            std::max(longest_, document_rows)) <= window_bytes_;
}

int64_t SweepWindowFill::room() const {
  if (documents_ == 0) return std::numeric_limits<int64_t>::max();
  if (!fits(1)) return 0;
  // The bytes grow with the rows: the most that fit, by bisection.
  int64_t lo = 1, hi = 2;
  while (hi < (int64_t{1} << 30) && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

void SweepWindowFill::add(int64_t document_rows) {
  ++documents_;
  rows_ += document_rows;
  longest_ = std::max(longest_, document_rows);
}

Result<SweepWindowPlan> plan_sweep_window(const ModelLayout& layout, uint64_t budget,
                                          const SweepWork& work, const PlanOptions& base) {
  const ModelConfig& c = layout.config();
  SweepWindowPlan p;
  // The weights' own plan holds no sequence state (the window brings its own) and no pass
  // buffers (a sweep computes the template prefix inside its window), unless the documents
  // feed the prefix through passes first (work.prefix_passes: a prefill pass over its length).
  p.options = base;
  p.options.passes = work.prefix_passes;
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
  // When the job's documents do not all fit at the longest's size, the window takes what the
  // weights' minimum leaves, for shorter documents to fill (SweepWindowFill); otherwise the
  // weights keep the rest (pinned units, a cache).
  p.window_bytes = k.bytes();
  if (budget > 0 && docs < most)
    p.window_bytes = budget - min_memory_for_batch(layout, p.options, 1);
  p.weight_budget = budget > 0 ? budget - p.window_bytes : 0;
  NJ_ASSIGN_OR_RETURN(p.residency, plan_residency(layout, p.weight_budget, p.options));
  return p;
}

}  // namespace nj
