// A group of experts in one parallel region (expert_group.h): the static split and the two
// phases, W1 and W3 with SiTU, then W2.
#include "engine/moe/expert_group.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "engine/ops/kernels.h"

namespace nj {

std::vector<std::vector<RowRun>> split_group_rows(std::span<const GroupExpert> group,
                                                  int matrix_rows, int threads) {
  std::vector<std::vector<RowRun>> runs(static_cast<size_t>(threads));
  int64_t total = 0;
  for (const GroupExpert& e : group) total += static_cast<int64_t>(e.rows) * matrix_rows;
  if (total == 0) return runs;
  int64_t before = 0;  // weight of the blocks before this one
  for (size_t i = 0; i < group.size(); ++i) {
    for (int r0 = 0; r0 < matrix_rows; r0 += kGroupBlockRows) {
      const int r1 = std::min(matrix_rows, r0 + kGroupBlockRows);
      const int64_t w = static_cast<int64_t>(group[i].rows) * (r1 - r0);
      // The thread whose share holds the block's midpoint; non-decreasing along the blocks.
      const int t = static_cast<int>(
          std::min<int64_t>(threads - 1, (2 * before + w) * threads / (2 * total)));
      before += w;
      auto& mine = runs[static_cast<size_t>(t)];
      if (!mine.empty() && mine.back().expert == static_cast<int>(i) && mine.back().r1 == r0)
        mine.back().r1 = r1;
      else
        mine.push_back({static_cast<int>(i), r0, r1});
    }
  }
  return runs;
}

void run_expert_group(const ModelConfig& c, std::span<const GroupExpert> group, const float* z,
                      float* g, float* u, float* y, int threads) {
  const size_t ls = static_cast<size_t>(c.latent), ms = static_cast<size_t>(c.moe_inter);
  const auto up = split_group_rows(group, c.moe_inter, threads);
  const auto down = split_group_rows(group, c.latent, threads);
  // Thread `id`'s share: W1 and W3 rows, SiTU on those columns; then (after every column of
  // g is done) W2 rows.
  auto gate_up = [&](int id) {
    for (const RowRun& run : up[static_cast<size_t>(id)]) {
      const GroupExpert& e = group[static_cast<size_t>(run.expert)];
      const size_t f = static_cast<size_t>(e.first);
      ops::matmul_range(e.w->w1, z + f * ls, e.rows, ls, g + f * ms, ms, run.r0, run.r1);
      ops::matmul_range(e.w->w3, z + f * ls, e.rows, ls, u + f * ms, ms, run.r0, run.r1);
      for (int i = 0; i < e.rows; ++i) {
        const size_t at = (f + static_cast<size_t>(i)) * ms + static_cast<size_t>(run.r0);
        ops::situ_glu(g + at, u + at, run.r1 - run.r0, c.situ_beta, c.situ_linear_beta, g + at);
      }
    }
  };
  auto down_proj = [&](int id) {
    for (const RowRun& run : down[static_cast<size_t>(id)]) {
      const GroupExpert& e = group[static_cast<size_t>(run.expert)];
      const size_t f = static_cast<size_t>(e.first);
      ops::matmul_range(e.w->w2, g + f * ms, e.rows, ms, y + f * ls, ls, run.r0, run.r1);
    }
  };
  if (threads == 1) {
    gate_up(0);
    down_proj(0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // The split assumed `threads`; a team the runtime made smaller leaves shares to thread 0.
    const int n = omp_get_num_threads(), id = omp_get_thread_num();
    for (int t = id; t < threads; t += n) gate_up(t);
#pragma omp barrier
    for (int t = id; t < threads; t += n) down_proj(t);
  }
}

}  // namespace nj
