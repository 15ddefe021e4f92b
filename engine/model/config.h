// The K3 model configuration, read strictly from config.json (k3-model.md §1).
//
// Accepts the released nested form (language model under `text_config`, layer map under
// `text_config.linear_attn_config`) and the flat fixture form (the same keys at the top
// level, with aliases such as `kda_num_heads`). Every dimension is required: a missing
// key is an error naming it, never a default. Behavioural switches that the released
// config sets explicitly (output gate, renormalization, ...) default to K3's values
// when absent, each noted below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace nj {

enum class AttentionKind : uint8_t { kKda, kMla };

struct ModelConfig {
  // Trunk.
  int hidden = 0;            // hidden_size
  int layers = 0;            // num_hidden_layers
  int vocab = 0;             // vocab_size
  float rms_eps = 0;         // rms_norm_eps
  bool tie_word_embeddings = false;  // absent = false (K3 unties them)
  std::vector<AttentionKind> attention;  // per zero-based layer, from full_attn_layers (one-based)

  // KDA (linear attention).
  int kda_heads = 0;         // linear_attn_config.num_heads      (H)
  int kda_head_dim = 0;      // linear_attn_config.head_dim       (D)
  int conv_kernel = 0;       // linear_attn_config.short_conv_kernel_size (K)
  bool has_gate_lower_bound = false;  // absent = the Kimi-Linear gate −exp(A_log)·softplus(z)
  float gate_lower_bound = 0;         // linear_attn_config.gate_lower_bound

  // Gated MLA.
  int heads = 0;             // num_attention_heads
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope = 0;           // qk_nope_head_dim
  int qk_rope = 0;           // qk_rope_head_dim
  int v_head_dim = 0;
  bool mla_output_gate = true;  // mla_use_output_gate; absent = true (K3)

  // FFN / LatentMoE.
  int num_experts = 0;
  int top_k = 0;             // num_experts_per_token
  int num_shared = 0;        // num_shared_experts
  int latent = 0;            // routed_expert_hidden_size
  int moe_inter = 0;         // moe_intermediate_size
  int dense_inter = 0;       // intermediate_size (dense layers)
  int first_k_dense = 0;     // first_k_dense_replace
  float routed_scaling = 1;  // routed_scaling_factor; absent = 1.0
  bool renormalize = true;   // moe_renormalize; absent = true (K3)
  bool latent_norm = true;   // latent_moe_use_norm; absent = true (K3)

  int attn_res_block_size = 0;
  float situ_beta = 4;          // activation_situ_beta (alias situ_beta); absent = 4.0
  float situ_linear_beta = 25;  // activation_situ_linear_beta (alias situ_linear_beta); absent = 25.0

  // Routed experts quantized as MXFP4 (compressed-tensors mxfp4-pack-quantized, group 32).
  bool mxfp4_experts = false;

  // Derived.
  int kda_width() const { return kda_heads * kda_head_dim; }     // P
  int mla_q_width() const { return heads * (qk_nope + qk_rope); }
  int shared_inter() const { return num_shared * moe_inter; }
  bool is_dense(int layer) const { return layer < first_k_dense; }
  int num_kda_layers() const;
  int num_mla_layers() const;
};

// Parses config.json text. `name` prefixes errors ("<name>: key 'x' ...").
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& name);

// Reads DIR/config.json.
Result<ModelConfig> load_model_config(const std::string& model_dir);

}  // namespace nj
