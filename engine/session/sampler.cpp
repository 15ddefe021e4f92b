// Greedy and stochastic sampling, deterministic given the RNG state.
#include "engine/session/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace nj {

uint64_t rng_next(RngState& r) {
  uint64_t z = (r.s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double rng_uniform(RngState& r) { return static_cast<double>(rng_next(r) >> 11) * 0x1.0p-53; }

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0f) return argmax(logits);
  // Candidates ordered by logit (descending; ties by id), cut by top-k.
  std::vector<int32_t> ids;
  ids.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) ids.push_back(static_cast<int32_t>(i));
  if (ids.empty()) return 0;
  auto better = [&](int32_t a, int32_t b) {
    const float x = logits[static_cast<size_t>(a)], y = logits[static_cast<size_t>(b)];
    return x != y ? x > y : a < b;
  };
  size_t keep = ids.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) keep = static_cast<size_t>(params_.top_k);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(keep), ids.end(), better);
  ids.resize(keep);
  // Softmax at the temperature, in double, in that order.
  std::vector<double> p(keep);
  const double top = logits[static_cast<size_t>(ids[0])];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - top) / params_.temperature);
    sum += p[i];
  }
  // Top-p: the shortest prefix whose mass reaches top_p (at least one id).
  size_t n = keep;
  if (params_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += p[i] / sum;
      if (cum >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (size_t i = 0; i < n; ++i) mass += p[i];
  const double u = rng_uniform(rng_) * mass;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += p[i];
    if (u < cum) return ids[i];
  }
  return ids[n - 1];
}

}  // namespace nj
