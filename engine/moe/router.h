// LatentMoE routing (k3-model.md §6): sigmoid scores, biased top-k selection, unbiased
// renormalized weights.
#pragma once

namespace nj {

// scores: [E] σ(router · x) (unbiased). bias: [E] e_score_correction_bias, which steers the
// selection only. Writes the k selected experts to `selected` in rank order (highest biased
// score first; ties go to the lower index) and their weights to `weights`:
//   w_j = s[sel_j] / (Σ_j s[sel_j] + 1e-20) · scaling   when renormalize, else s[sel_j] · scaling
// (the sum runs in rank order).
// REQUIRES: 0 < k <= E.
void route_top_k(const float* scores, const float* bias, int E, int k, bool renormalize, float scaling,
                 int* selected, float* weights);

}  // namespace nj
