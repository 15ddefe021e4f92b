// log-softmax of the logits for a generated token and the most likely alternatives.
#include "engine/session/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nj {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_k) {
  const double kImpossible = -std::numeric_limits<double>::infinity();
  auto logit = [&](size_t i) {
    return std::isnan(logits[i]) ? kImpossible : static_cast<double>(logits[i]);
  };
  double max = kImpossible;
  for (size_t i = 0; i < logits.size(); ++i) max = std::max(max, logit(i));
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logit(i) != kImpossible) sum += std::exp(logit(i) - max);
  // (x - max) - log(sum), not x - (max + log(sum)): with huge logits the latter loses
  // log(sum) to rounding.
  const double log_sum = std::log(sum);
  auto logprob = [&](size_t i) { return static_cast<float>((logit(i) - max) - log_sum); };

  TokenLogprobs out;
  out.logprob = logprob(static_cast<size_t>(id));
  const size_t k = std::min(static_cast<size_t>(std::max(top_k, 0)), logits.size());
  if (k == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const double x = logit(static_cast<size_t>(a));
                      const double y = logit(static_cast<size_t>(b));
                      return x != y ? x > y : a < b;
                    });
  for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logprob(static_cast<size_t>(ids[i])));
  return out;
}

}  // namespace nj
