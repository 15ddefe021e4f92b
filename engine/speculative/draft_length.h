// How many tokens to draft: k adapts to the sequence's recent acceptance, so that drafts
// that are never accepted cost nearly nothing.
//
// Model. Each drafted token is accepted with probability a, given that the ones before it
// were (a geometric run), so a pass with k drafts emits E(k) = 1 + a + ... + a^k tokens on
// average, and costs PassCost::relative(rows + k, rows) of the pass without them. a is
// estimated from recent passes: accepted drafts over accepted drafts plus passes whose run
// ended on a rejection, with exponentially decaying weights, starting from one rejection
// (a = 0: a sequence earns its drafts). The policy drafts the k that maximizes the pass's
// expected tokens per byte.
//
// When that is k = 0 the estimate would never change again, so the policy probes with one
// draft after a cool-down that doubles after each probe that fails (1, 2, 4 ... 64 passes)
// and resets when a draft is accepted. A new sequence starts with a probe: one accepted
// draft lifts the estimate to ~1/2 and k grows from there. A sequence whose drafts are
// never accepted pays one extra row in its first pass, then one per cool-down (5 rows in
// its first 32 passes, 1 per 64 passes once the cool-down has grown).
#pragma once

#include "engine/plan/pass_cost.h"

namespace nj {

struct DraftLengthOptions {
  // The most drafts per pass (why 8: planner.h).
  int max_draft_tokens = kMaxDraftTokens;
  // Weight kept per pass by the acceptance estimate: ~10 recent passes dominate, so the
  // estimate follows a change in the text within a few passes.
  double decay = 0.9;
  // The longest cool-down between probes of a sequence whose drafts fail, in passes.
  int max_cool_down = 64;
  // false: always draft the most allowed (forced drafts in tests, an oracle's ceiling in the
  // benchmark); true: choose k from the acceptance as above.
  bool adaptive = true;
};

// A pass being assembled: the expected tokens its sequences emit and the rows it carries,
// so that a batch's drafts are chosen against the whole pass (a sequence's drafts share
// the trunk with every other row of the pass).
struct PassLoad {
  double tokens = 0;
  int rows = 0;
};

// One sequence's draft length. Not thread-safe.
class DraftLength {
 public:
  explicit DraftLength(DraftLengthOptions options = {}) : options_(options) {}

  // The drafts to ask for in a pass that already carries `load` (including this sequence's
  // own row and token), at most `cap`: the k maximizing
  // (load.tokens + E(k) − 1) / bytes(load.rows + k), or a probe of 1 (see above).
  // REQUIRES: load.rows >= 1.
  int choose(const PassCost& cost, int cap, const PassLoad& load);
  // E(k) − 1: the tokens k drafts add to a pass on average.
  double expected_gain(int k) const;
  // After verification: of `drafted` tokens, `accepted` were accepted (drafted == 0: the
  // drafter proposed nothing; nothing is learned).
  void record(int drafted, int accepted);

  double acceptance() const;  // the current estimate of a

 private:
  DraftLengthOptions options_;
  // Decayed counts, starting from one rejection: drafts before any is accepted are probes,
  // so drafts that are wrong from the start cost one row per probe (a prior of 1/2 cost
  // ~10 wasted rows per sequence at k3-mini's shapes before it faded).
  double accepted_ = 0, rejected_ = 1;
  int cool_down_ = 0;       // passes left before the next probe
  int next_cool_down_ = 1;  // the cool-down after the next failed probe
  bool probing_ = false;    // the last choice was a probe
};

}  // namespace nj
