// The pieces of one decoder layer, over a chunk of T tokens (k3-model.md §2–§6). Each
// reads like its section of the model document; the session strings them together.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_source.h"
#include "engine/model/weights.h"
#include "engine/moe/routing_profile.h"
#include "engine/state/sequence_state.h"

namespace nj {

// Reusable float buffers, grown on demand and never shrunk.
class Scratch {
 public:
  float* get(size_t slot, size_t n) {
    if (slot >= bufs_.size()) bufs_.resize(slot + 1);
    if (bufs_[slot].size() < n) bufs_[slot].resize(n);
    return bufs_[slot].data();
  }

 private:
  std::vector<std::vector<float>> bufs_;
};

// out[t] = Σ_j p_j · sources_j[t],  p = softmax_j( rms_normed(sources_j[t]) · w ).
// sources: pointers to [T][hidden]; `out` must not alias a source.
void attn_res(const std::vector<const float*>& sources, const float* w, int T, int hidden, float eps,
              float* out);

// KDA attention: x [T][hidden] (normed) → out [T][hidden]; updates S and the conv history.
void kda_forward(const ModelConfig& c, const KdaWeights& w, LayerState& st, const float* x, int T,
                 float* out, Scratch& s);

// Gated MLA attention (absorbed form): appends the chunk's latents to the cache, then each
// token attends to every cached position up to its own.
void mla_forward(const ModelConfig& c, const MlaWeights& w, LayerState& st, const float* x, int T,
                 float* out, Scratch& s);

// SiTU-GLU MLP: out = down(SiTU(gate x, up x)). x [T][hidden] → out [T][hidden].
void ffn_forward(const ModelConfig& c, const DenseFfnWeights& w, const float* x, int T, float* out,
                 Scratch& s);

struct MoeCounters {
  double wait_s = 0;               // blocked acquiring experts
  uint64_t expert_computations = 0;
};

// LatentMoE: routes each token, computes each selected expert once for all the chunk's
// tokens routed to it (acquired from `source`), adds the shared expert.
// When `profile` is given, the experts each pass requests are recorded in it.
Status moe_forward(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source,
                   const float* x, int T, float* out, Scratch& s, MoeCounters* counters,
                   RoutingProfile* profile = nullptr);

}  // namespace nj
