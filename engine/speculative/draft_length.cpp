// DraftLength: expected tokens per byte under a geometric acceptance model.
#include "engine/speculative/draft_length.h"

#include <algorithm>

namespace nj {

double DraftLength::acceptance() const {
  return accepted_ / (accepted_ + rejected_);
}

double DraftLength::expected_gain(int k) const {
  const double a = acceptance();
  double gain = 0, term = 1;
  for (int i = 1; i <= k; ++i) gain += (term *= a);
  return gain;
}

int DraftLength::choose(const PassCost& cost, int cap, const PassLoad& load) {
  cap = std::min(cap, options_.max_draft_tokens);
  probing_ = false;
  if (cap <= 0) return 0;
  if (!options_.adaptive) return cap;
  const double a = acceptance();
  int best = 0;
  // Costs relative to a one-row pass (1 when nothing is read: drafts are then free).
  double best_value = load.tokens / cost.relative(load.rows), gain = 0, term = 1;
  for (int k = 1; k <= cap; ++k) {
    term *= a;
    gain += term;
    const double value = (load.tokens + gain) / cost.relative(load.rows + k);
    if (value > best_value) {
      best_value = value;
      best = k;
    }
  }
  if (best == 0) {
    if (cool_down_ > 0) {
      --cool_down_;
      return 0;
    }
    best = 1;  // a probe
    probing_ = true;
  }
  return best;
}

void DraftLength::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  accepted_ = accepted_ * options_.decay + accepted;
  rejected_ = rejected_ * options_.decay + (accepted < drafted ? 1.0 : 0.0);
  if (accepted > 0) {
    next_cool_down_ = 1;
    cool_down_ = 0;
  } else if (probing_) {
    cool_down_ = next_cool_down_;
    next_cool_down_ = std::min(2 * next_cool_down_, options_.max_cool_down);
  }
}

}  // namespace nj
