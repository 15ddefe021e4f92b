// The layer sweep: a second schedule of the forward pass, for a window of sequences whose
// new tokens are all known in advance (prefill: documents to classify, their labels'
// teacher-forced continuations, prompts). Forward::run is token-major: one pass reads every
// layer for a few rows, so every sequence keeps its state for every layer between passes.
// The sweep is layer-major (FlexGen's block schedule): the whole window goes through layer 0,
// then layer 1, and so on.
//
//   for each layer l:
//     read l's trunk once (the next layer's is read meanwhile)
//     for each chunk of the window's rows:            attention half (decoder_layer.h)
//       each sequence's layer-l state: from its start state (or empty, or its parent's end),
//       dropped once it is done and its branches have started (layer_chunks.h; a final
//       state asked for is kept)
//     FFN half over all the window's rows at once:     each routed expert read once per layer
//   the head over the rows whose logits are wanted
//
// What crosses a layer boundary is only the window's residual stream (per row: h, which the
// running prefix equals there, and the attention-residual bank). Every step is per row and every
// matrix product keeps its canonical order (engine/ops/kernels.h), so each sequence's logits and
// final state are bit for bit what Forward::run gives for it alone, whatever the window, the
// chunking, the budget, the threads or the SIMD level.
//
// A branch (SweepSequence::parent) continues another sequence of the window from its end,
// inside each layer: its layer state starts as a copy of the parent's after the parent's
// rows. A classification scores its labels this way: each feed path of its label trie is a
// branch of the document, in the same sweep, with no decode steps after it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/model/config.h"
#include "engine/state/sequence_state.h"
#include "engine/util/status.h"
#include "engine/weights/weight_source.h"

namespace nj {

struct SweepSequence {
  std::span<const int32_t> ids;          // its new tokens, in order. REQUIRES: non-empty
  const SequenceState* start = nullptr;  // its state before `ids` (read one layer at a time;
                                         // several sequences may share one); nullptr: empty
  int parent = -1;  // a branch: continues sequence `parent` (< its own index) from its end
  LogitsWanted logits = LogitsWanted::kLast;
  float* all_logits = nullptr;              // with kAll: receives [ids.size()][vocab]
  std::vector<float>* last_logits = nullptr;  // kLast or kAll: the last row's logits
  SequenceState* final_state = nullptr;     // when given: the whole state after `ids`
  SequenceUsage* usage = nullptr;           // when given: its share of the sweep, by rows among
                                            // the sequences with one; its batch, the usages
};

struct SweepOptions {
  // Rows of the attention half computed at once. Its scratch (KDA's and MLA's activations)
  // grows with it; the matrix products reach their rate well before 256 rows (kernel_bench).
  int chunk_rows = 256;
  // Sequences that start in one chunk, at most, and done sequences that may wait for their
  // branches before the branches run: together they bound the layer states the window holds
  // at once (LayerChunks::bound, engine/sweep/layer_chunks.h), whatever its sequences.
  int chunk_sequences = 8;
  int waiting_parents = 2;
};

// What one sweep did.
struct SweepStats {
  int sequences = 0;  // every sequence of the window, branches included
  int roots = 0;      // those without a parent
  int rows = 0;
  int peak_states = 0;  // the most layer states alive at once (LayerChunks)
  double compute_s = 0, wait_s = 0;
  uint64_t trunk_bytes_read = 0, expert_bytes_read = 0, other_bytes_read = 0;
  uint64_t bytes_read() const { return trunk_bytes_read + expert_bytes_read + other_bytes_read; }
  uint64_t expert_computations = 0;
  std::vector<int> distinct_experts;  // [layers]: experts the window needed (0 for dense)
};

// What crosses a layer boundary of a sweep, for every row of the window: the residual stream
// h (the running prefix equals it there) and the attention-residual bank's first `banked`
// entries (k3-model.md §2). A sweep stopped at a boundary and started again from it, with the
// same sequences, computes the same bits as one that never stopped.
struct SweepBoundary {
  int layer = 0;   // the next layer to run: 1 .. layers - 1
  int rows = 0;    // the window's rows
  int hidden = 0;
  int banked = 0;  // bank entries: banked_before(config, layer)
  float* h = nullptr;        // [rows][hidden]
  float* blocks = nullptr;   // entry j of row t at blocks + j * block_stride + t * hidden
  size_t block_stride = 0;   // floats from one bank entry to the next
};

// Where a sweep stops and starts again: its layer boundaries. At K3's size a window is hours
// of work; the caller (the runner) keeps boundaries durable for a crash or a stop.
class SweepProgress {
 public:
  virtual ~SweepProgress() = default;
  // Before the first layer: when a boundary of this same window (the same sequences in the
  // same order) was saved, set b.layer and b.banked and fill h and the bank entries; leave
  // b.layer at 0 to start from the embeddings. An error stops the sweep before any work.
  virtual Status resume(SweepBoundary& b) = 0;
  // After each layer but the last (b.layer is the next): save it when due. Returns true when
  // the sweep must stop here (the caller's stop: a deadline, a signal); run() then returns
  // Cancelled naming the layer.
  virtual bool at_boundary(const SweepBoundary& b) = 0;
};

// The shape a sweep's buffers are sized for.
struct SweepShape {
  int rows = 1;         // the window's rows, over all its sequences
  int chunk_rows = 1;   // rows of the attention half at once
  int sequences = 1;    // sequences in the window
  int max_context = 1;  // positions one sequence may reach
  int logits_rows = 1;  // rows whose logits are wanted
  int chunk_sequences = SweepOptions{}.chunk_sequences;  // sequences starting in one chunk
};

// Bytes of a sweep's buffers: the window's residual stream and its FFN/MoE activations, the
// attention half's activations for one chunk, the head's rows: the planner's estimate and
// the allocation both come from this definition.
uint64_t sweep_activation_bytes(const ModelConfig& c, const SweepShape& s);

// Not thread-safe: one sweep at a time. The config and the weight source must outlive it.
class Sweep {
 public:
  Sweep(const ModelConfig& config, WeightSource& weights, SweepOptions options = {});

  // Runs `seqs` through every layer. InvalidArgument (nothing done) for an empty window, an
  // empty sequence, a parent that is not an earlier sequence, a start state shaped for
  // another model, kAll without a destination, an id outside the vocabulary, or a final
  // state asked for with `progress` (a resumed sweep has no states of the layers it skips).
  // NonFinite ("non-finite logits at position P") when logits asked for hold a NaN or an
  // infinity. With `progress`, it may start at a saved boundary and stop at one (Cancelled).
  // Other errors are the weight source's and the progress's.
  Status run(std::span<SweepSequence> seqs, SweepProgress* progress = nullptr);

  const SweepStats& last() const { return last_; }

 private:
  Status validate(std::span<const SweepSequence> seqs, const SweepProgress* progress) const;

  const ModelConfig& config_;
  WeightSource& weights_;
  SweepOptions options_;
  SweepStats last_;
};

}  // namespace nj
