// Attention residuals (k3-model.md §2): each row mixes the banked block inputs and the
// running sum by a softmax over their RMS-normed projections onto w.
#include <cmath>
#include <vector>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"
#include "engine/ops/parallel.h"

namespace nj {

void attn_res(std::span<const float* const> sources, const float* w, int rows, int hidden, float eps, float* mix,
              float* out) {
  const size_t hs = static_cast<size_t>(hidden), n = sources.size();
  // Rows are independent: split over the threads (each range with its own weights scratch).
  ops::parallel_rows(rows, static_cast<double>(3 * n + 1) * static_cast<double>(hidden), [&](int first, int last) {
    std::vector<float> own;
    float* m = mix;
    if (first > 0) {
      own.resize(n);
      m = own.data();
    }
    for (int t = first; t < last; ++t) {
      const size_t off = static_cast<size_t>(t) * hs;
      for (size_t j = 0; j < n; ++j) {
        const float* v = sources[j] + off;
        const float inv_rms = 1.0f / std::sqrt(ops::dot(v, v, hidden) / static_cast<float>(hidden) + eps);
        m[j] = ops::dot(v, w, hidden) * inv_rms;
      }
      ops::softmax_inplace(m, static_cast<int>(n));
      float* o = out + off;
      for (int i = 0; i < hidden; ++i) o[i] = 0.0f;
      for (size_t j = 0; j < n; ++j) ops::axpy(m[j], sources[j] + off, o, hidden);  // the RAW sources
    }
  });
}

}  // namespace nj
