// Top-k routing with a deterministic tie rule.
#include "engine/moe/router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace nj {

void route_top_k(const float* scores, const float* bias, int E, int k, bool renormalize, float scaling,
                 int* selected, float* weights) {
  thread_local std::vector<int> order;
  thread_local std::vector<float> biased;
  order.resize(static_cast<size_t>(E));
  biased.resize(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    order[static_cast<size_t>(e)] = e;
    const float b = scores[e] + bias[e];
    // A NaN would break the ordering; it ranks last, as it can never be a meaningful pick.
    biased[static_cast<size_t>(e)] = std::isnan(b) ? -std::numeric_limits<float>::infinity() : b;
  }
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    const float x = biased[static_cast<size_t>(a)], y = biased[static_cast<size_t>(b)];
    return x != y ? x > y : a < b;
  });
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    selected[j] = order[static_cast<size_t>(j)];
    sum += scores[selected[j]];
  }
  for (int j = 0; j < k; ++j) {
    const float s = scores[selected[j]];
    weights[j] = (renormalize ? s / (sum + 1e-20f) : s) * scaling;
  }
}

}  // namespace nj
