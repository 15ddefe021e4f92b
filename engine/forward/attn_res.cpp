// Attention residuals (k3-model.md §2): each row mixes the banked block inputs and the
// running sum by a softmax over their RMS-normed projections onto w.
#include <cmath>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"

namespace nj {

void attn_res(std::span<const float* const> sources, const float* w, int rows, int hidden, float eps, float* mix,
              float* out) {
  const size_t hs = static_cast<size_t>(hidden), n = sources.size();
  for (int t = 0; t < rows; ++t) {
    const size_t off = static_cast<size_t>(t) * hs;
    for (size_t j = 0; j < n; ++j) {
      const float* v = sources[j] + off;
      const float inv_rms = 1.0f / std::sqrt(ops::dot(v, v, hidden) / static_cast<float>(hidden) + eps);
      mix[j] = ops::dot(v, w, hidden) * inv_rms;
    }
    ops::softmax_inplace(mix, static_cast<int>(n));
    float* o = out + off;
    for (int i = 0; i < hidden; ++i) o[i] = 0.0f;
    for (size_t j = 0; j < n; ++j) ops::axpy(mix[j], sources[j] + off, o, hidden);  // the RAW sources
  }
}

}  // namespace nj
