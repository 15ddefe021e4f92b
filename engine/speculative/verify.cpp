// accept_drafts: plain decoding's draws, checked against the drafts in order.
#include "engine/speculative/verify.h"

namespace nj {

Acceptance accept_drafts(Sampler& sampler, std::span<const float> logits, int vocab,
                         std::span<const int32_t> drafts,
                         const std::function<bool(int32_t)>& finishes, std::vector<int32_t>* out) {
  Acceptance a;
  a.drafted = static_cast<int>(drafts.size());
  const size_t v = static_cast<size_t>(vocab);
  for (size_t i = 0; i < drafts.size(); ++i) {
    const RngState before = sampler.rng();
    const int32_t drawn = sampler.sample(logits.subspan(i * v, v));
    if (drawn != drafts[i]) {
      sampler.set_rng(before);  // plain decoding draws it again from the kept state
      break;
    }
    out->push_back(drawn);
    ++a.accepted;
    if (finishes(drawn)) {
      a.finished = true;
      break;
    }
  }
  return a;
}

}  // namespace nj
