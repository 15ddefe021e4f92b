// LatentMoE (k3-model.md §6) over a pass: route every row, then compute each selected expert
// once for all the rows routed to it, in ascending expert order, and combine each row's
// expert outputs in its rank order (so batching never changes a bit).
#include "engine/moe/moe_layer.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/model/layers.h"
#include "engine/moe/router.h"
#include "engine/ops/kernels.h"

namespace nj {

Status moe_forward(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source, const float* x,
                   int rows, float* out, MoeActivations& a, FfnActivations& ffn, MoeCounters* counters,
                   RoutingProfile* profile, bool count_routing) {
  const int E = c.num_experts, k = c.top_k, lat = c.latent, mi = c.moe_inter;
  const size_t hs = static_cast<size_t>(c.hidden), ls = static_cast<size_t>(lat), ks = static_cast<size_t>(k);
  const size_t R = static_cast<size_t>(rows), Es = static_cast<size_t>(E);
  // s = σ(gate · x) on the full-width x; selection with the bias; renormalized weights.
  float* scores = a.scores.data();
  ops::matmul(w.router, x, rows, hs, scores, Es);
  ops::sigmoid_inplace(scores, rows * E);
  int32_t* selected = a.selected.data();
  float* weights = a.weights.data();
  for (size_t t = 0; t < R; ++t)
    route_top_k(scores + t * Es, w.router_bias, E, k, c.renormalize, c.routed_scaling, selected + t * ks,
                weights + t * ks);

  // z = routed_expert_down_proj x   [rows][latent]
  float* z = a.z.data();
  ops::matmul(w.down_proj, x, rows, hs, z, ls);

  // The (row, rank) pairs each expert serves, grouped by expert (a counting sort keeps
  // each group in row order): pairs of expert e are by_expert[end[e-1] .. end[e]).
  int32_t* end = a.expert_end.data();
  std::fill_n(end, Es + 1, 0);
  for (size_t i = 0; i < R * ks; ++i) end[selected[i] + 1]++;
  for (int e = 0; e < E; ++e) end[e + 1] += end[e];
  int32_t* by_expert = a.by_expert.data();
  {
    std::vector<int32_t> next(end, end + E);
    for (size_t i = 0; i < R * ks; ++i) by_expert[next[static_cast<size_t>(selected[i])]++] = static_cast<int32_t>(i);
  }
  std::vector<int> needed;
  for (int e = 0; e < E; ++e)
    if (end[e + 1] > end[e]) needed.push_back(e);
  counters->distinct_experts = static_cast<int>(needed.size());
  if (profile) profile->record(layer, needed, count_routing);
  source.will_need_experts(layer, needed);

  float* expert_out = a.expert_out.data();  // [rows][k][latent]
  for (int e : needed) {
    const int32_t* pairs = by_expert + end[e];
    const int n = end[e + 1] - end[e];
    auto t0 = std::chrono::steady_clock::now();
    auto expert = source.expert(layer, e);
    counters->wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!expert.ok()) return expert.status();
    const ExpertWeights& ew = **expert;
    float* zin = a.gather.data();
    for (int i = 0; i < n; ++i) std::copy_n(z + static_cast<size_t>(pairs[i] / k) * ls, ls, zin + static_cast<size_t>(i) * ls);
    float* g = a.g.data();
    float* u = a.u.data();
    float* y = a.y.data();
    ops::matmul(ew.w1, zin, n, ls, g, static_cast<size_t>(mi));
    ops::matmul(ew.w3, zin, n, ls, u, static_cast<size_t>(mi));
    ops::situ_glu(g, u, n * mi, c.situ_beta, c.situ_linear_beta, g);
    ops::matmul(ew.w2, g, n, static_cast<size_t>(mi), y, ls);
    for (int i = 0; i < n; ++i)
      std::copy_n(y + static_cast<size_t>(i) * ls, ls, expert_out + static_cast<size_t>(pairs[i]) * ls);
    ++counters->expert_computations;
  }

  // acc = RMSNorm(Σ_j w_j · y_j) in rank order; out = up_proj acc + shared(x)
  float* acc = a.acc.data();
  for (size_t t = 0; t < R; ++t) {
    float* at = acc + t * ls;
    for (int i = 0; i < lat; ++i) at[i] = 0.0f;
    for (size_t j = 0; j < ks; ++j) {
      const size_t pair = t * ks + j;
      ops::axpy(weights[pair], expert_out + pair * ls, at, lat);
    }
    if (c.latent_norm) ops::rmsnorm(at, w.latent_norm, lat, c.rms_eps, at);
  }
  ops::matmul(w.up_proj, acc, rows, ls, out, hs);
  if (w.has_shared) {
    float* sh = a.shared.data();
    ffn_forward(c, w.shared, x, rows, sh, ffn);
    for (size_t i = 0; i < R * hs; ++i) out[i] = out[i] + sh[i];
  }
  return Status();
}

}  // namespace nj
