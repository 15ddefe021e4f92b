// SiTU-GLU MLP (k3-model.md §3, §6): the dense layer-0 FFN and the shared expert.
#include "engine/moe/ffn.h"

#include <algorithm>

#include "engine/ops/kernels.h"
#include "engine/ops/parallel.h"
#include "engine/util/status.h"

namespace nj {

void ffn_forward(const ModelConfig& c, const DenseFfnWeights& w, const float* x, int T, float* out,
                 FfnActivations& a) {
  const size_t inter = static_cast<size_t>(w.gate_proj.rows), hs = static_cast<size_t>(c.hidden);
  // Rows at once: what the buffers hold. Each row's result is the same in any chunk (every
  // product keeps its canonical order per row), so a window can hold scratch for a chunk only.
  const size_t chunk = std::min(a.g.size(), a.u.size()) / inter;
  NJ_CHECK_MSG(T == 0 || chunk > 0, "the MLP's buffers hold no row");
  float* g = a.g.data();
  float* u = a.u.data();
  for (size_t r = 0; r < static_cast<size_t>(T); r += chunk) {
    const int n = static_cast<int>(std::min(chunk, static_cast<size_t>(T) - r));
    const float* xr = x + r * hs;
    ops::matmul(w.gate_proj, xr, n, hs, g, inter);
    ops::matmul(w.up_proj, xr, n, hs, u, inter);
    ops::parallel_rows(n, 40.0 * static_cast<double>(inter), [&](int first, int last) {
      const size_t at = static_cast<size_t>(first) * inter;
      ops::situ_glu(g + at, u + at, static_cast<int>(static_cast<size_t>(last - first) * inter), c.situ_beta,
                    c.situ_linear_beta, g + at);
    });
    ops::matmul(w.down_proj, g, n, inter, out + r * hs, hs);
  }
}

}  // namespace nj
