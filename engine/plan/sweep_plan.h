// Sizing a layer sweep's window (engine/sweep/sweep.h) to a memory budget.
//
// A sweep holds, besides the weights it streams, the window's residual stream and its FFN
// half's buffers (sweep_activation_bytes: per window row, plus one chunk of the attention
// half's scratch) and one layer's states of the sequences alive at once (the template prefix,
// the documents and their label branches, each at its deepest context; LayerChunks::bound of
// them); no pass buffers (SweepWork::prefix_passes aside). The weights get what is left, planned
// by the residency planner as for one row (ring, expert buffers, then pinned units and cache), and
// need at least its minimum. The window is the most documents that fit, at most the job's;
// when a ring of one trunk unit (no read ahead) holds more of them than the usual two, the
// plan takes one (PlanOptions::ring_slots).
//
// Documents are rarely all as long as the longest, so a window is filled by what its documents
// really hold (SweepWindowFill): the plan gives the window every byte the weights' minimum
// leaves (window_bytes), and documents join it in their order while they fit.
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
  // Each document feeds the prefix in passes first (run --no-prefix-reuse): the Forward's
  // pass buffers are then counted.
  bool prefix_passes = false;
  int chunk_rows = SweepOptions{}.chunk_rows;
  int chunk_sequences = SweepOptions{}.chunk_sequences;
  int waiting_parents = SweepOptions{}.waiting_parents;
};

struct SweepWindowPlan {
  int documents = 0;              // per window, every document as long as the longest
  int rows = 0;                   // of that window
  int64_t windows = 0;            // to sweep the job's documents at that size
  uint64_t activation_bytes = 0;  // that window's buffers (sweep_activation_bytes)
  uint64_t state_bytes = 0;       // the layer states alive at once (LayerChunks::bound)
  uint64_t window_bytes = 0;      // what a window's buffers and states may take (SweepWindowFill)
  uint64_t weight_budget = 0;  // what is left for the weights (0 = everything resident)
  uint64_t min_memory_bytes = 0;  // the least budget that sweeps one document
  ResidencyPlan residency;     // the weights' plan under weight_budget
  PlanOptions options;         // what it was planned with
};

// Plans a window under `budget` (0: everything resident; the window is then all documents).
// ResourceExhausted naming the minimum when not even one document fits.
Result<SweepWindowPlan> plan_sweep_window(const ModelLayout& layout, uint64_t budget,
                                          const SweepWork& work, const PlanOptions& base);

// What a window of `documents` documents of `document_rows` rows in all (the longest
// `longest`) takes: its buffers and its layer states, each document with the job's branches.
uint64_t sweep_window_bytes(const ModelConfig& c, const SweepWork& work, int documents,
                            int64_t document_rows, int64_t longest);

// A window filled with documents in the order they come: each joins while the window's bytes
// stay within the plan's window_bytes and it holds fewer than `max_documents`. The first
// document always joins (the plan holds the job's longest alone). The runner claims a window's
// items by it and the forecast forms its windows by it, so the two agree.
class SweepWindowFill {
 public:
  SweepWindowFill(const ModelConfig& c, const SweepWork& work, uint64_t window_bytes,
                  int max_documents);

  bool fits(int64_t document_rows) const;  // whether a document of these rows would join
  int64_t room() const;                    // the most rows a joining document may have (0: full)
  void add(int64_t document_rows);

  int documents() const { return documents_; }
  int64_t document_rows() const { return rows_; }  // the documents' rows, without branches

 private:
  const ModelConfig* config_;
  SweepWork work_;
  uint64_t window_bytes_;
  int max_documents_;
  int documents_ = 0;
  int64_t rows_ = 0, longest_ = 0;
};

// Bytes of one layer's state (the larger of a KDA and an MLA layer's) at `positions`.
uint64_t layer_state_bytes(const ModelConfig& c, int64_t positions);

}  // namespace nj
