// SiTU-GLU MLP (k3-model.md §3, §6): the dense layer-0 FFN and the shared expert.
#include "engine/moe/ffn.h"
#include "engine/ops/kernels.h"

namespace nj {
void ffn_forward(const ModelConfig& c, const DenseFfnWeights& w, const float* x, int T, float* out,
                 FfnActivations& a) {
  const int inter = w.gate_proj.rows;
  const size_t ti = static_cast<size_t>(T) * static_cast<size_t>(inter);
  float* g = a.g.data();
  float* u = a.u.data();
  ops::matmul(w.gate_proj, x, T, static_cast<size_t>(c.hidden), g, static_cast<size_t>(inter));
  ops::matmul(w.up_proj, x, T, static_cast<size_t>(c.hidden), u, static_cast<size_t>(inter));
  ops::situ_glu(g, u, static_cast<int>(ti), c.situ_beta, c.situ_linear_beta, g);
  ops::matmul(w.down_proj, g, T, static_cast<size_t>(inter), out, static_cast<size_t>(c.hidden));
}

}  // namespace nj
