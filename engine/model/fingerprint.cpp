// The model's fingerprint: what identifies the computation a set of weights defines.
#include "engine/model/fingerprint.h"

#include <sstream>

#include <xxhash.h>

namespace nj {

std::string canonical_config_text(const ModelConfig& c) {
  std::ostringstream o;
  o.precision(9);
  o << "hidden=" << c.hidden << ";layers=" << c.layers << ";vocab=" << c.vocab
    << ";eps=" << c.rms_eps << ";tie=" << c.tie_word_embeddings << ";map=";
  for (auto k : c.attention) o << (k == AttentionKind::kMla ? 'M' : 'K');
  o << ";kda=" << c.kda_heads << "x" << c.kda_head_dim << ",conv" << c.conv_kernel << ",glb"
    << c.has_gate_lower_bound << ":" << c.gate_lower_bound << ";mla=" << c.heads << ",q"
    << c.q_lora_rank << ",kv" << c.kv_lora_rank << "," << c.qk_nope << "/" << c.qk_rope << "/"
    << c.v_head_dim << ",gate" << c.mla_output_gate << ";moe=" << c.num_experts << "/" << c.top_k
    << ",sh" << c.num_shared << ",lat" << c.latent << ",mi" << c.moe_inter << ",di" << c.dense_inter
    << ",fkd" << c.first_k_dense << ",rs" << c.routed_scaling << ",rn" << c.renormalize << ",ln"
    << c.latent_norm << ";arb=" << c.attn_res_block_size << ";situ=" << c.situ_beta << "/"
    << c.situ_linear_beta << ";mxfp4=" << c.mxfp4_experts;
  return o.str();
}

uint64_t model_fingerprint(const ModelConfig& c, const TensorIndex& index) {
  const std::string text = canonical_config_text(c);
  return XXH3_64bits(text.data(), text.size()) ^ index.layout_fingerprint();
}

}  // namespace nj
