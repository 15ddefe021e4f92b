// Speculator: draft, feed, verify, learn.
#include "engine/speculative/speculator.h"

#include <algorithm>

namespace nj {

Speculator::Speculator(std::unique_ptr<Drafter> drafter, DraftLengthOptions options)
    : drafter_(std::move(drafter)), length_(options) {}

std::span<const int32_t> Speculator::feed(std::span<const int32_t> consumed, int32_t next, int room,
                                          const PassCost& cost, PassLoad* load) {
  fed_.assign(1, next);
  load->rows += 1;
  load->tokens += 1;
  const int k = length_.choose(cost, std::max(0, room), *load);
  if (k > 0) {
    context_.assign(consumed.begin(), consumed.end());
    context_.push_back(next);
    drafter_->propose(context_, k, &fed_);
    const int drafted = static_cast<int>(fed_.size()) - 1;
    load->rows += drafted;
    load->tokens += length_.expected_gain(drafted);
  }
  return fed_;
}

Acceptance Speculator::verify(Sampler& sampler, std::span<const float> logits, int vocab,
                              const std::function<bool(int32_t)>& finishes,
                              std::vector<int32_t>* out) {
  const Acceptance a = accept_drafts(sampler, logits, vocab,
                                     std::span<const int32_t>(fed_).subspan(1), finishes, out);
  length_.record(a.drafted, a.accepted);
  stats_.passes += 1;
  stats_.drafted += static_cast<uint64_t>(a.drafted);
  stats_.accepted += static_cast<uint64_t>(a.accepted);
  return a;
}

}  // namespace nj
