// LatentMoE (k3-model.md §6) over a chunk: route every token, then compute each selected
// expert once for all the tokens routed to it, in ascending expert order, and combine
// each token's expert outputs in its rank order (so batching never changes a bit).
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/model/layers.h"
#include "engine/moe/router.h"
#include "engine/ops/kernels.h"

namespace nj {
namespace {
enum Buf : size_t { kScores, kWeights, kZ, kGather, kG, kU, kY, kExpertOut, kAcc, kShared };
}  // namespace

Status moe_forward(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source,
                   const float* x, int T, float* out, Scratch& s, MoeCounters* counters,
                   RoutingProfile* profile) {
  const int E = c.num_experts, k = c.top_k, lat = c.latent, mi = c.moe_inter, hid = c.hidden;
  const size_t hs = static_cast<size_t>(hid), ls = static_cast<size_t>(lat);
  // s = σ(gate · x) on the full-width x; selection with the bias; renormalized weights.
  float* scores = s.get(kScores, static_cast<size_t>(T) * static_cast<size_t>(E));
  ops::matmul(w.router, x, T, hs, scores, static_cast<size_t>(E));
  ops::sigmoid_inplace(scores, T * E);
  std::vector<int> selected(static_cast<size_t>(T) * static_cast<size_t>(k));
  float* weights = s.get(kWeights, static_cast<size_t>(T) * static_cast<size_t>(k));
  for (int t = 0; t < T; ++t)
    route_top_k(scores + static_cast<size_t>(t) * static_cast<size_t>(E), w.router_bias, E, k, c.renormalize,
                c.routed_scaling, &selected[static_cast<size_t>(t) * static_cast<size_t>(k)],
                weights + static_cast<size_t>(t) * static_cast<size_t>(k));

  // z = routed_expert_down_proj x   [T][latent]
  float* z = s.get(kZ, static_cast<size_t>(T) * ls);
  ops::matmul(w.down_proj, x, T, hs, z, ls);

  // Which (token, rank) pairs each expert serves.
  std::vector<std::vector<int>> users(static_cast<size_t>(E));
  for (int i = 0; i < T * k; ++i) users[static_cast<size_t>(selected[static_cast<size_t>(i)])].push_back(i);
  std::vector<int> needed;
  for (int e = 0; e < E; ++e)
    if (!users[static_cast<size_t>(e)].empty()) needed.push_back(e);
  if (profile) profile->record(layer, needed, /*count=*/T == 1);
  source.will_need_experts(layer, needed);

  float* expert_out = s.get(kExpertOut, static_cast<size_t>(T) * static_cast<size_t>(k) * ls);  // [T][k][latent]
  for (int e : needed) {
    const std::vector<int>& pairs = users[static_cast<size_t>(e)];
    const int n = static_cast<int>(pairs.size());
    auto t0 = std::chrono::steady_clock::now();
    auto expert = source.expert(layer, e);
    counters->wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!expert.ok()) return expert.status();
    const ExpertWeights& ew = **expert;
    float* zin = s.get(kGather, static_cast<size_t>(n) * ls);
    for (int i = 0; i < n; ++i)
      std::copy_n(z + static_cast<size_t>(pairs[static_cast<size_t>(i)] / k) * ls, ls, zin + static_cast<size_t>(i) * ls);
    float* g = s.get(kG, static_cast<size_t>(n) * static_cast<size_t>(mi));
    float* u = s.get(kU, static_cast<size_t>(n) * static_cast<size_t>(mi));
    float* y = s.get(kY, static_cast<size_t>(n) * ls);
    ops::matmul(ew.w1, zin, n, ls, g, static_cast<size_t>(mi));
    ops::matmul(ew.w3, zin, n, ls, u, static_cast<size_t>(mi));
    ops::situ_glu(g, u, n * mi, c.situ_beta, c.situ_linear_beta, g);
    ops::matmul(ew.w2, g, n, static_cast<size_t>(mi), y, ls);
    for (int i = 0; i < n; ++i)
      std::copy_n(y + static_cast<size_t>(i) * ls, ls, expert_out + static_cast<size_t>(pairs[static_cast<size_t>(i)]) * ls);
    ++counters->expert_computations;
  }

  // acc = RMSNorm(Σ_j w_j · y_j) in rank order; out = up_proj acc + shared(x)
  float* acc = s.get(kAcc, static_cast<size_t>(T) * ls);
  for (int t = 0; t < T; ++t) {
    float* a = acc + static_cast<size_t>(t) * ls;
    for (int i = 0; i < lat; ++i) a[i] = 0.0f;
    for (int j = 0; j < k; ++j) {
      const size_t pair = static_cast<size_t>(t) * static_cast<size_t>(k) + static_cast<size_t>(j);
      ops::axpy(weights[pair], expert_out + pair * ls, a, lat);
    }
    if (c.latent_norm) ops::rmsnorm(a, w.latent_norm, lat, c.rms_eps, a);
  }
  ops::matmul(w.up_proj, acc, T, ls, out, hs);
  if (w.has_shared) {
    float* sh = s.get(kShared, static_cast<size_t>(T) * hs);
    ffn_forward(c, w.shared, x, T, sh, s);
    for (size_t i = 0; i < static_cast<size_t>(T) * hs; ++i) out[i] = out[i] + sh[i];
  }
  return Status();
}

}  // namespace nj
