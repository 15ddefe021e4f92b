// One sequence's speculation: its drafter, its draft length, its statistics. The decode
// loops (engine/speculative/decode.h for one sequence, runner/lockstep.h for a batch) ask it what
// to feed in a pass and hand it the pass's logits to verify.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/session/sampler.h"
#include "engine/speculative/draft_length.h"
#include "engine/speculative/drafter.h"
#include "engine/plan/pass_cost.h"
#include "engine/speculative/verify.h"

namespace nj {

// What speculation did for a sequence (or, summed, for a run).
struct SpeculationStats {
  uint64_t passes = 0;    // decode passes: each fed the token just chosen and its drafts
  uint64_t drafted = 0;   // drafted tokens fed
  uint64_t accepted = 0;  // drafted tokens plain decoding produced (emitted without a pass)
  // Tokens each pass emitted: the one it fed, and its accepted drafts.
  double tokens_per_pass() const {
    return passes ? static_cast<double>(passes + accepted) / static_cast<double>(passes) : 0.0;
  }
  void add(const SpeculationStats& o) {
    passes += o.passes;
    drafted += o.drafted;
    accepted += o.accepted;
  }
};

// Not thread-safe: one sequence's.
class Speculator {
 public:
  explicit Speculator(std::unique_ptr<Drafter> drafter, DraftLengthOptions options = {});

  // The tokens to feed in the sequence's next pass: `next` (the token just chosen), then
  // drafts, at most `room` of them (callers pass the tokens the sequence may still emit
  // after `next`, less one: a draft accepted as the last token would never be fed) and as
  // many as the draft length chooses against `cost` and the pass's `load`, to which this
  // sequence's rows and expected tokens are added. `consumed`: every token the sequence's
  // state has consumed. The span is valid until the next call.
  std::span<const int32_t> feed(std::span<const int32_t> consumed, int32_t next, int room,
                                const PassCost& cost, PassLoad* load);

  // Verifies the drafts of the last feed() against the pass's logits ([rows][vocab], rows
  // as fed) with accept_drafts (verify.h), records the outcome, and returns it.
  Acceptance verify(Sampler& sampler, std::span<const float> logits, int vocab,
                    const std::function<bool(int32_t)>& finishes, std::vector<int32_t>* out);

  const SpeculationStats& stats() const { return stats_; }
  const DraftLength& draft_length() const { return length_; }

 private:
  std::unique_ptr<Drafter> drafter_;
  DraftLength length_;
  SpeculationStats stats_;
  std::vector<int32_t> context_;  // consumed + next, for the drafter
  std::vector<int32_t> fed_;      // next, then the drafts
};

}  // namespace nj
