// Sizing a layer sweep's window (engine/sweep/sweep.h) to a memory budget.
//
// A sweep holds, besides the weights it streams, the window's residual stream and its FFN
// half's buffers (sweep_activation_bytes: per window row, plus one chunk of the attention
// half's scratch), one layer's states of the sequences alive at once (documents and their
// label branches, each at its deepest context; LayerChunks::bound of them), and the start state the
// documents share (the template prefix, every layer of it). The weights get what is left, planned
// by the residency planner as for one row (ring, expert buffers, then pinned units and cache), and
// need at least its minimum. The window is the most documents that fit, at most the job's;
// when a ring of one trunk unit (no read ahead) holds more of them than the usual two, the
// plan takes one (PlanOptions::ring_slots).
#pragma once

#include <cstdint>

#include "engine/model/layout.h"
#include "engine/plan/planner.h"
#include "engine/sweep/sweep.h"
#include "engine/util/status.h"

namespace nj {

// What each document of a job brings to a window (its largest, so any window of them fits).
struct SweepWork {
  int64_t documents = 1;     // the job's documents
  int64_t document_rows = 1;  // rows of its longest document
  int64_t branch_rows = 0;   // rows of a document's label branches (feed paths, summed)
  int branches = 0;          // label branches per document
  int64_t start_rows = 0;    // rows of the job's template prefix: the window's root
  int logits_rows = 1;       // rows per document whose logits are wanted (root + branches)
  int chunk_rows = SweepOptions{}.chunk_rows;
  int chunk_sequences = SweepOptions{}.chunk_sequences;
  int waiting_parents = SweepOptions{}.waiting_parents;
};

struct SweepWindowPlan {
  int documents = 0;           // per window
  int rows = 0;                // per window
  int64_t windows = 0;         // to sweep the job's documents
  uint64_t activation_bytes = 0;  // the window's buffers (sweep_activation_bytes)
  uint64_t state_bytes = 0;       // the layer states alive at once (LayerChunks::bound)
  uint64_t weight_budget = 0;  // what is left for the weights (0 = everything resident)
  uint64_t min_memory_bytes = 0;  // the least budget that sweeps one document
  ResidencyPlan residency;     // the weights' plan under weight_budget
  PlanOptions options;         // what it was planned with
};

// Plans a window under `budget` (0: everything resident; the window is then all documents).
// ResourceExhausted naming the minimum when not even one document fits.
Result<SweepWindowPlan> plan_sweep_window(const ModelLayout& layout, uint64_t budget,
                                          const SweepWork& work, const PlanOptions& base);

// Bytes of one layer's state (the larger of a KDA and an MLA layer's) at `positions`.
uint64_t layer_state_bytes(const ModelConfig& c, int64_t positions);

}  // namespace nj
