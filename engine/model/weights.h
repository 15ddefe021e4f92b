// Typed views of the K3 weights the forward pass computes with (k3-model.md §7).
//
// A view points into bytes owned by a WeightSource (resident buffers, a streaming ring
// slot, an expert-cache slot). Matrices stay in their stored format (MatRef); the small
// vectors (norm gains, conv taps, biases) are widened to F32 copies owned by the view,
// and each attention-residual pair w_norm ⊙ w_proj is folded once.
#pragma once

#include <vector>

#include "engine/ops/mat.h"

namespace nj {

using ops::MatRef;

struct KdaWeights {
  MatRef q_proj, k_proj, v_proj;  // [P][hidden]
  MatRef g_proj;                  // [P][hidden] full-rank output gate
  MatRef o_proj;                  // [hidden][P]
  MatRef f_a_proj;                // [D][hidden]
  MatRef f_b_proj;                // [P][D]
  MatRef b_proj;                  // [H][hidden]
  const float* q_conv = nullptr;  // [P][K]; tap K-1 multiplies the current input
  const float* k_conv = nullptr;  // [P][K]
  const float* v_conv = nullptr;  // [P][K]
  const float* a_log = nullptr;   // [H] (the first H of the stored values)
  const float* dt_bias = nullptr; // [P]
  const float* o_norm = nullptr;  // [D]
};

struct MlaWeights {
  MatRef q_a_proj;                   // [q_lora][hidden]
  const float* q_a_norm = nullptr;   // [q_lora]
  MatRef q_b_proj;                   // [heads*(nope+rope)][q_lora]
  MatRef kv_a_proj;                  // [kv_lora+rope][hidden]
  const float* kv_a_norm = nullptr;  // [kv_lora]
  MatRef kv_b_proj;                  // [heads*(nope+v)][kv_lora]: per head k_nope rows then v rows
  MatRef o_proj;                     // [hidden][heads*v]
  MatRef g_proj;                     // [heads*v][hidden]
};

struct DenseFfnWeights {
  MatRef gate_proj, up_proj;  // [inter][hidden]
  MatRef down_proj;           // [hidden][inter]
};

struct MoeWeights {
  MatRef router;                       // gate.weight [E][hidden]
  const float* router_bias = nullptr;  // [E] e_score_correction_bias (selection only)
  MatRef down_proj;                    // routed_expert_down_proj [latent][hidden]
  MatRef up_proj;                      // routed_expert_up_proj [hidden][latent]
  const float* latent_norm = nullptr;  // routed_expert_norm [latent]
  bool has_shared = false;
  DenseFfnWeights shared;              // [shared_inter][hidden] ...
};

struct LayerWeights {
  int layer = 0;
  const float* input_norm = nullptr;   // [hidden]
  const float* post_norm = nullptr;    // [hidden]
  const float* attn_res = nullptr;     // [hidden] self_attention_res_norm ⊙ self_attention_res_proj
  const float* mlp_res = nullptr;      // [hidden] mlp_res_norm ⊙ mlp_res_proj
  bool is_mla = false;
  KdaWeights kda;
  MlaWeights mla;
  bool is_dense = false;
  DenseFfnWeights dense;
  MoeWeights moe;
  std::vector<float> owned;            // backing store of the widened vectors above
};

struct ExpertWeights {
  MatRef w1;  // gate [moe_inter][latent]
  MatRef w2;  // down [latent][moe_inter]
  MatRef w3;  // up   [moe_inter][latent]
};

struct HeadWeights {
  const float* norm = nullptr;     // [hidden]; nullptr in a split head's parts after the first
  const float* out_res = nullptr;  // [hidden] output_attn_res_norm ⊙ output_attn_res_proj
  MatRef lm_head;                  // [vocab][hidden], or a part's rows of it
  int first_row = 0;               // a part of a split head: its first row (vocab id)
  std::vector<float> owned;
};

}  // namespace nj
