// A batch: the engine's unit of work. One forward pass carries several sequences, each with
// its own state and any number of new tokens (a decode step is one token, a prefill chunk
// many; they mix freely), reads every weight once for all of them, and hands each sequence
// the logits it asked for.
//
// Rows. The pass lays the sequences' new tokens end to end: step i owns rows
// [row0_i, row0_i + ids_i.size()) of every activation buffer, in the order of the steps.
// Everything but attention works on all rows at once (norms, residual mixing, every matrix
// product, the MoE, which groups the rows of all sequences by expert); KDA's short conv and
// recurrence and MLA's latent cache and attention run per sequence, on that sequence's
// rows and state. Each (weight row, token row) product has one canonical order
// (engine/ops/kernels.h), so a sequence's logits are bit-identical whatever else shares
// its pass: batch size is a throughput dial, never a quality dial.
//
// Tentative steps (speculative decoding, engine/speculative/). A step marked `tentative` feeds a
// token and the drafted tokens after it, takes the logits at every row, and leaves its
// sequence unsettled: the caller then decides how many of its rows plain decoding would
// have fed and calls Forward::keep(state, n), after which the state is bit for bit the one
// that feeding only those n tokens would have produced. MLA caches and the token list are
// truncated; KDA's recurrence cannot be undone, so the pass keeps what is needed to redo
// it on the kept rows (KdaRollback, activations.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/state/sequence_state.h"
#include "engine/util/status.h"

namespace nj {

// Tokens per prefill pass when nothing else is said. Each pass reads every trunk layer once
// and each needed expert once, so larger chunks read less per token; activation memory
// grows linearly with the rows of a pass. The one place this default lives.
inline constexpr int kDefaultPrefillChunk = 64;

enum class LogitsWanted : uint8_t {
  kNone,  // none: the state's last_logits are cleared (a prefill chunk followed by more)
  kLast,  // after the step's last token: the state's last_logits
  kAll,   // after every token of the step: SeqStep::all_logits, and last_logits as for kLast
};

// A sequence's share of the passes it took part in. A pass's cost (bytes read, compute
// time, time waiting for weights) is attributed to its sequences in proportion to the rows
// each contributed: a sequence with r of a pass's R rows is charged r/R of it. The shares
// of a pass's sequences sum to the pass's totals.
struct SequenceUsage {
  uint64_t tokens = 0;        // tokens fed
  uint64_t passes = 0;        // passes this sequence took part in
  int max_batch = 0;          // the most sequences that shared a pass with it (itself included;
                              // in a sweep, branches count as their root: Sweep::run)
  double compute_s = 0;       // share of pass time not spent waiting for weights
  double wait_s = 0;          // share of time blocked on the weight source
  double bytes_read = 0;      // share of weight bytes read from disk
  double trunk_bytes_read = 0, expert_bytes_read = 0;

  void add(const SequenceUsage& o);
};

// The share of one pass (Forward's PassStats) or one layer sweep (SweepStats) owed by a
// sequence that brought `own_rows` of its rows.
template <class Stats>
SequenceUsage usage_share(uint64_t own_rows, const Stats& pass) {
  const double share = static_cast<double>(own_rows) / pass.rows;
  SequenceUsage u;
  u.tokens = own_rows;
  u.passes = 1;
  u.max_batch = pass.sequences;
  u.compute_s = share * pass.compute_s;
  u.wait_s = share * pass.wait_s;
  u.bytes_read = share * static_cast<double>(pass.bytes_read());
  u.trunk_bytes_read = share * static_cast<double>(pass.trunk_bytes_read);
  u.expert_bytes_read = share * static_cast<double>(pass.expert_bytes_read);
  return u;
}

// One sequence's part of a pass.
struct SeqStep {
  SequenceState* state = nullptr;  // advanced by the pass (position, tokens, caches, logits)
  std::span<const int32_t> ids;    // the new tokens; REQUIRES: non-empty
  LogitsWanted logits = LogitsWanted::kLast;
  float* all_logits = nullptr;  // with kAll: receives [ids.size()][vocab]
  SequenceUsage* usage = nullptr;            // when given, this step's share is added to it
  // Speculative verification (see the top of this file): the state stays unsettled until
  // Forward::keep. REQUIRES: logits == kAll.
  bool tentative = false;
};

// Feeds `ids` to one sequence as steps of at most `chunk` rows, each handed to `run` (one
// pass of a Forward, or a batch's next pass), stopping at the first error. The last step
// asks for the last row's logits; with `all_logits` every step asks for all of its rows',
// which land in *all_logits, resized to [ids.size()][vocab]. Each step adds its share of its
// pass to `usage` when given.
Status feed_in_chunks(SequenceState& state, std::span<const int32_t> ids, int chunk, int vocab,
                      std::vector<float>* all_logits, SequenceUsage* usage,
                      const std::function<Status(SeqStep&)>& run);

// The rows a step owns in a pass, and its state (per layer).
struct SeqRows {
  LayerState* state = nullptr;
  int row0 = 0;
  int rows = 0;
  int tentative = -1;  // the step's index among the pass's tentative steps, or -1
};

}  // namespace nj
