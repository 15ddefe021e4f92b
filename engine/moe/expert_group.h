// A group of routed experts computed in one parallel region. With many sequences in a pass
// most experts serve a few rows each (8 sequences x top-8 over 192 experts: ~55 experts of
// ~1.2 rows; 64 sequences: ~177 of ~2.9), so each of their products is too small to be worth
// waking the thread team for (a fork/join costs tens of microseconds with passive waiting).
// A group shares the wake-ups: one region per group, one barrier inside it (W2 needs all of
// SiTU(W1 z, W3 z)).
//
// Work split. Every matrix of every expert in the group is cut into blocks of kGroupBlockRows
// output rows, each weighed by the rows it computes (block rows x the expert's token rows);
// thread i of n takes the blocks whose weight midpoints fall in the i-th n-th of the total, a
// contiguous run in (expert, block) order, so each thread calls the kernel once per expert
// and matrix it touches. Which thread computes a row never changes its bits (every
// (weight row, token row) pair follows the canonical order of engine/ops/kernels.h for any
// row range), so the results are the same for any thread count and any grouping.
#pragma once

#include <span>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace nj {

// One expert of a group and its rows in the group's buffers.
struct GroupExpert {
  const ExpertWeights* w = nullptr;  // held by the caller for the group's lifetime
  int first = 0;                     // its first row in the group's buffers
  int rows = 0;                      // token rows routed to it (>= 1)
};

// Rows [r0, r1) of one expert's matrix, computed by one thread.
struct RowRun {
  int expert = 0;  // index into the group
  int r0 = 0, r1 = 0;
};

// Output rows per block of the static split: a multiple of the kernels' row groups (4) and
// panels (16), small enough to balance a group of one or two experts over the threads.
inline constexpr int kGroupBlockRows = 16;

// The static split of matrices of `matrix_rows` output rows, one per expert of `group`,
// over `threads` threads: runs[i] is thread i's, in (expert, row) order.
std::vector<std::vector<RowRun>> split_group_rows(std::span<const GroupExpert> group,
                                                  int matrix_rows, int threads);

// For every expert of the group: y = W2 SiTU(W1 x, W3 x) over its rows, x = z[first ...].
// z: [rows][latent] (the gathered inputs, as they are: the kernels arrange them), g, u:
// [rows][moe_inter] scratch, y: [rows][latent]; `rows` = the group's total. Runs on up to
// `threads` OpenMP threads (1: the calling thread only). REQUIRES: the experts' rows are
// consecutive and disjoint in the buffers, threads >= 1.
void run_expert_group(const ModelConfig& c, std::span<const GroupExpert> group, const float* z,
                      float* g, float* u, float* y, int threads);

}  // namespace nj
