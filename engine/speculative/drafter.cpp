// Prompt-lookup and scripted drafts.
#include "engine/speculative/drafter.h"

#include <algorithm>

namespace nj {

void NgramDrafter::propose(std::span<const int32_t> context, int max, std::vector<int32_t>* out) {
  const size_t L = context.size();
  if (max <= 0 || L < 2) return;
  const size_t longest = std::min(static_cast<size_t>(std::max(1, options_.max_ngram)), L - 1);
  const size_t shortest = static_cast<size_t>(std::max(1, options_.min_ngram));
  for (size_t n = longest; n >= shortest; --n) {
    const auto suffix = context.subspan(L - n);
    // The most recent occurrence that ends before the last token (so something follows it).
    for (size_t j = L - n; j-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + static_cast<long>(j)))
        continue;
      const size_t first = out->size();
      for (size_t e = j + n; static_cast<int>(out->size() - first) < max; ++e)
        out->push_back(e < L ? context[e] : (*out)[first + (e - L)]);
      return;
    }
  }
}

void ScriptedDrafter::propose(std::span<const int32_t> context, int max,
                              std::vector<int32_t>* out) {
  if (context.size() < prompt_length_ || max <= 0) return;
  const size_t from = context.size() - prompt_length_;
  for (size_t i = from; i < script_.size() && static_cast<int>(i - from) < max; ++i)
    out->push_back(script_[i]);
}

}  // namespace nj
