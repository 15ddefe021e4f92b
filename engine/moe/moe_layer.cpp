// LatentMoE (k3-model.md §6) over a pass: route every row, then compute each selected expert
// once for all the rows routed to it, in ascending expert order, and combine each row's
// expert outputs in its rank order (so batching never changes a bit).
#include "engine/moe/moe_layer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "engine/moe/expert_group.h"
#include "engine/moe/ffn.h"
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

  // Groups of experts in ascending order, each computed in one parallel region
  // (expert_group.h): a group takes the next expert (waiting for it if need be), then as many
  // of the following ones as are already read, as the source lets the pass hold at once and
  // as the group's buffers have rows for. So a group is as large as the I/O allows: all of a
  // layer's experts when they are in memory, one at a time while a cold pass waits on the
  // disk (the rest keep reading meanwhile). Grouping never changes a bit.
  float* expert_out = a.expert_out.data();  // [rows][k][latent]
  float* gather = a.gather.data();          // [group rows][latent] the group's input rows
  const size_t capacity =
      std::min({a.gather.size() / ls, a.y.size() / ls, a.g.size() / static_cast<size_t>(mi),
                a.u.size() / static_cast<size_t>(mi)});
  const size_t hold = static_cast<size_t>(std::max(1, source.expert_hold_limit()));
  std::vector<std::shared_ptr<const ExpertWeights>> held;
  std::vector<GroupExpert> group;
  std::vector<const int32_t*> group_pairs;  // each group expert's (row, rank) pairs
  for (size_t next = 0; next < needed.size();) {
    held.clear();
    group.clear();
    group_pairs.clear();
    size_t group_rows = 0;
    for (; next < needed.size(); ++next) {
      const int e = needed[next];
      const size_t n = static_cast<size_t>(end[e + 1] - end[e]);
      NJ_CHECK_MSG(n <= capacity, "the MoE group buffers hold fewer rows than one expert serves");
      if (!group.empty() &&
          (group_rows + n > capacity || group.size() >= hold || !source.expert_ready(layer, e)))
        break;
      auto t0 = std::chrono::steady_clock::now();
      auto expert = source.expert(layer, e);
      counters->wait_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!expert.ok()) return expert.status();
      const int32_t* pairs = by_expert + end[e];
      for (size_t i = 0; i < n; ++i)
        std::copy_n(z + static_cast<size_t>(pairs[i] / k) * ls, ls, gather + (group_rows + i) * ls);
      group.push_back({expert->get(), static_cast<int>(group_rows), static_cast<int>(n)});
      group_pairs.push_back(pairs);
      held.push_back(*std::move(expert));
      group_rows += n;
      ++counters->expert_computations;
    }
    // The thread team only when the group's work is worth its wake-up (as ops::matmul).
    const double work = static_cast<double>(group_rows) * mi * lat * 3;
    const int threads = work < 524288.0 ? 1 : omp_get_max_threads();
    float* y = a.y.data();
    run_expert_group(c, group, gather, a.g.data(), a.u.data(), y, threads);
    for (size_t j = 0; j < group.size(); ++j)
      for (int i = 0; i < group[j].rows; ++i)
        std::copy_n(y + static_cast<size_t>(group[j].first + i) * ls, ls,
                    expert_out + static_cast<size_t>(group_pairs[j][i]) * ls);
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
