// The MoE layer's and the SiTU-GLU MLP's activations (k3-model.md §3, §6): routing, expert
// groups and outputs for all rows of a pass. Sized, with the rest of a pass's buffers, by
// visit_buffers (engine/forward/activations.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace nj {

template <class T>
using Buf = std::vector<T>;

// LatentMoE (k3-model.md §6): routing and expert outputs for all rows of all sequences.
struct MoeActivations {
  Buf<float> scores;        // [rows][E] σ(router x)
  Buf<int32_t> selected;    // [rows][top_k] experts in rank order
  Buf<float> weights;       // [rows][top_k] their combine weights
  Buf<int32_t> by_expert;   // [rows x top_k] (row, rank) pairs grouped by expert
  Buf<int32_t> expert_end;  // [E + 1] group boundaries in by_expert
  Buf<float> z;             // [rows][latent] down_proj x
  Buf<float> gather;        // [group rows][latent] a group of experts' input rows
  Buf<float> g, u;          // [group rows][moe_inter]
  Buf<float> y;             // [group rows][latent] their output rows
  Buf<float> acc;           // [rows][latent] Σ w_j y_j in ascending expert order, then normed
  Buf<float> shared;        // [ffn rows][hidden] the shared expert's output, a chunk at a time
};

// SiTU-GLU MLP (dense layers and the shared expert).
struct FfnActivations {
  Buf<float> g, u;  // [ffn rows][max(dense_inter, shared_inter)]
};

// Token rows the MoE's expert groups hold at once (engine/moe/expert_group.h): every (row,
// rank) pair of a pass up to 256 pairs (a decode step of 16 sequences at top-16; at K3's
// shapes ~53 KB each), and always at least one pass's rows (an expert serves each row once;
// a sweep's window passes its chunk rows, and an expert serving more takes several groups).
inline size_t moe_group_rows(size_t rows, size_t top_k) {
  return std::min(rows * top_k, std::max<size_t>(rows, 256));
}

// The single definition of the MoE's and the MLP's buffers for passes of R rows: calls
// f(buffer, element_count) for each (engine/forward/activations.h walks it for a pass, the
// layer sweep for a window's rows). The MLP (dense and shared) and the expert groups run
// `ffn_rows` rows at a time (at most R): a pass holds all its rows, a window one chunk.
template <class M, class F2, class F>
void visit_ffn_buffers(M& moe, F2& ffn, const ModelConfig& c, size_t R, size_t ffn_rows, F&& f) {
  const size_t FR = std::max<size_t>(1, std::min(R, ffn_rows));
  const size_t hid = static_cast<size_t>(c.hidden);
  bool any_moe = false, any_dense = false;
  for (int l = 0; l < c.layers; ++l) (c.is_dense(l) ? any_dense : any_moe) = true;
  size_t inter = any_dense ? static_cast<size_t>(c.dense_inter) : 0;
  if (any_moe) {
    const size_t E = static_cast<size_t>(c.num_experts), k = static_cast<size_t>(c.top_k),
                 lat = static_cast<size_t>(c.latent), mi = static_cast<size_t>(c.moe_inter);
    f(moe.scores, R * E);
    f(moe.selected, R * k);
    f(moe.weights, R * k);
    f(moe.by_expert, R * k);
    f(moe.expert_end, E + 1);
    f(moe.z, R * lat);
    const size_t G = moe_group_rows(FR, k);  // a window's larger experts span several groups
    f(moe.gather, G * lat);
    f(moe.g, G * mi);
    f(moe.u, G * mi);
    f(moe.y, G * lat);
    f(moe.acc, R * lat);
    if (c.shared_inter() > 0) {
      f(moe.shared, FR * hid);
      inter = std::max(inter, static_cast<size_t>(c.shared_inter()));
    }
  }
  f(ffn.g, FR * inter);
  f(ffn.u, FR * inter);
}

}  // namespace nj
