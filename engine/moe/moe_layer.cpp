// LatentMoE (k3-model.md §6) over a pass: route every row, then compute each selected expert
// once for all the rows routed to it, in ascending expert order, and add each expert's output
// rows into their rows' sums as it is done: every row's sum is in its experts' ascending order
// whatever the grouping (so batching never changes a bit), and no row keeps its experts'
// outputs apart (a window of thousands of rows holds one latent sum per row).
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
#include "engine/ops/parallel.h"

namespace nj {

Status moe_forward(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source, const float* x,
                   int rows, float* out, MoeActivations& a, FfnActivations& ffn, MoeCounters* counters,
                   RoutingProfile* profile, bool count_routing) {
  NJ_RETURN_IF_ERROR(
      moe_experts(c, layer, w, source, x, rows, a, counters, profile, count_routing));
  moe_output(c, w, x, 0, rows, out, a, ffn);
  return Status();
}

Status moe_experts(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source,
                   const float* x, int rows, MoeActivations& a, MoeCounters* counters,
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
  if (profile) {
    profile->record(layer, needed, count_routing);
    profile->record_choices(layer, end, rows);
  }
  source.will_need_experts(layer, needed);

  // Groups of experts in ascending order, each computed in one parallel region
  // (expert_group.h): a group takes the next expert (waiting for it if need be), then as many
  // of the following ones as are already read, as the source lets the pass hold at once and
  // as the group's buffers have rows for. So a group is as large as the I/O allows: all of a
  // layer's experts when they are in memory, one at a time while a cold pass waits on the
  // disk (the rest keep reading meanwhile). An expert serving more rows than the buffers hold
  // (a sweep's window) is computed in groups of its own, a buffer's rows at a time, acquired
  // once. Grouping never changes a bit.
  float* acc = a.acc.data();        // [rows][latent] Σ w_j y_j, in ascending expert order
  float* gather = a.gather.data();  // [group rows][latent] the group's input rows
  ops::parallel_rows(rows, static_cast<double>(ls), [&](int first, int last) {
    std::fill(acc + static_cast<size_t>(first) * ls, acc + static_cast<size_t>(last) * ls, 0.0f);
  });
  const size_t capacity =
      std::min({a.gather.size() / ls, a.y.size() / ls, a.g.size() / static_cast<size_t>(mi),
                a.u.size() / static_cast<size_t>(mi)});
  NJ_CHECK_MSG(capacity > 0, "the MoE group buffers hold no row");
  const size_t hold = static_cast<size_t>(std::max(1, source.expert_hold_limit()));
  std::vector<std::shared_ptr<const ExpertWeights>> held;
  std::vector<GroupExpert> group;
  std::vector<const int32_t*> group_pairs;  // each group expert's (row, rank) pairs
  std::shared_ptr<const ExpertWeights> part;  // an expert larger than a group, acquired
  size_t part_done = 0;                       // its rows computed so far
  for (size_t next = 0; next < needed.size();) {
    held.clear();
    group.clear();
    group_pairs.clear();
    size_t group_rows = 0;
    while (next < needed.size()) {
      const int e = needed[next];
      const size_t total = static_cast<size_t>(end[e + 1] - end[e]);
      const size_t n = std::min(total - part_done, capacity - group_rows);
      if (!group.empty() && (group_rows + (total - part_done) > capacity || group.size() >= hold ||
                             !source.expert_ready(layer, e)))
        break;
      std::shared_ptr<const ExpertWeights> expert = part;
      if (!expert) {
        auto t0 = std::chrono::steady_clock::now();
        auto got = source.expert(layer, e);
        counters->wait_s +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!got.ok()) return got.status();
        expert = *std::move(got);
        ++counters->expert_computations;
      }
      const int32_t* pairs = by_expert + end[e] + part_done;
      group.push_back({expert.get(), static_cast<int>(group_rows), static_cast<int>(n)});
      group_pairs.push_back(pairs);
      held.push_back(expert);
      group_rows += n;
      part_done += n;
      if (part_done < total) {  // the buffers are full: its next rows in the next group
        part = std::move(expert);
        break;
      }
      part.reset();
      part_done = 0;
      ++next;
    }
    // The group's input rows, gathered over the threads.
    ops::parallel_rows(static_cast<int>(group.size()), static_cast<double>(group_rows * ls) / group.size(),
                       [&](int first, int last) {
                         for (int j = first; j < last; ++j)
                           for (int i = 0; i < group[j].rows; ++i)
                             std::copy_n(z + static_cast<size_t>(group_pairs[j][i] / k) * ls, ls,
                                         gather + static_cast<size_t>(group[j].first + i) * ls);
                       });
    // The thread team only when the group's work is worth its wake-up (as ops::matmul).
    const double work = static_cast<double>(group_rows) * mi * lat * 3;
    const int threads = work < ops::kParallelMinWork ? 1 : omp_get_max_threads();
    float* y = a.y.data();
    run_expert_group(c, group, gather, a.g.data(), a.u.data(), y, threads);
    // acc[row] += w · y, the group's experts in ascending order for every row; each thread
    // takes a range of the pass's rows (and skips the pairs of the others).
    ops::parallel_rows(rows, static_cast<double>(group_rows * ls) / rows, [&](int first, int last) {
      for (size_t j = 0; j < group.size(); ++j)
        for (int i = 0; i < group[j].rows; ++i) {
          const size_t pair = static_cast<size_t>(group_pairs[j][i]), row = pair / ks;
          if (row < static_cast<size_t>(first) || row >= static_cast<size_t>(last)) continue;
          ops::axpy(weights[pair], y + static_cast<size_t>(group[j].first + i) * ls, acc + row * ls, lat);
        }
    });
  }

  return Status();
}

void moe_output(const ModelConfig& c, const MoeWeights& w, const float* x, int first, int n,
                float* out, MoeActivations& a, FfnActivations& ffn) {
  const int lat = c.latent;
  const size_t hs = static_cast<size_t>(c.hidden), ls = static_cast<size_t>(lat),
               R = static_cast<size_t>(n);
  float* acc = a.acc.data() + static_cast<size_t>(first) * ls;
  x += static_cast<size_t>(first) * hs;
  // acc = RMSNorm(Σ_j w_j · y_j); out = up_proj acc + shared(x), the shared expert a chunk of
  // rows at a time (as many as its buffer holds)
  if (c.latent_norm) ops::rmsnorm_rows(acc, w.latent_norm, n, lat, c.rms_eps, acc);
  ops::matmul(w.up_proj, acc, n, ls, out, hs);
  if (w.has_shared) {
    float* sh = a.shared.data();
    const size_t chunk = a.shared.size() / hs;
    for (size_t r = 0; r < R; r += chunk) {
      const size_t m = std::min(chunk, R - r);
      ffn_forward(c, w.shared, x + r * hs, static_cast<int>(m), sh, ffn);
      float* o = out + r * hs;
      ops::add_rows(sh, static_cast<int>(m), hs, o);
    }
  }
}

}  // namespace nj
