// Model::open: config → index → layout → weights.
#include "engine/model/model.h"

#include <sstream>

#include <xxhash.h>

#include <spdlog/spdlog.h>

#include "engine/io/env.h"
#include "engine/pack/pack.h"
#include "engine/weights/resident_source.h"

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

Result<ModelHeaders> open_model_headers(const std::string& dir, bool use_pack,
                                        std::string* pack_warning, const std::string& pack_dir) {
  ModelHeaders h;
  NJ_ASSIGN_OR_RETURN(h.config, load_model_config(dir));
  NJ_ASSIGN_OR_RETURN(TensorIndex index, TensorIndex::open(dir));
  h.index = std::make_unique<TensorIndex>(std::move(index));
  NJ_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::build(h.config, *h.index));
  h.layout = std::make_unique<ModelLayout>(std::move(layout));
  if (use_pack) {
    NJ_ASSIGN_OR_RETURN(
        bool used,
        use_trunk_pack(*Env::posix(), pack_dir.empty() ? dir : pack_dir, *h.index, h.layout.get(),
                       static_cast<uint32_t>(h.index->files().size()), pack_warning));
    (void)used;
  }
  return h;
}

Result<std::unique_ptr<Model>> Model::open(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  NJ_ASSIGN_OR_RETURN(m->config_, load_model_config(dir));
  NJ_ASSIGN_OR_RETURN(TensorIndex index, TensorIndex::open(dir, options.index_threads));
  m->index_ = std::make_unique<TensorIndex>(std::move(index));
  NJ_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::build(m->config_, *m->index_));
  m->layout_ = std::make_unique<ModelLayout>(std::move(layout));
  if (options.use_pack) {
    std::string reason;
    const std::string dir_for_pack = options.pack_dir.empty() ? dir : options.pack_dir;
    NJ_ASSIGN_OR_RETURN(m->uses_pack_,
                        use_trunk_pack(*Env::posix(), dir_for_pack, *m->index_, m->layout_.get(),
                                       static_cast<uint32_t>(m->index_->files().size()), &reason));
    if (!reason.empty()) spdlog::warn("not using the packed trunk: {}", reason);
  }
  m->plan_options_ = options.plan;
  m->plan_options_.io_threads = options.streaming.io_threads;  // one block staging buffer each
  NJ_ASSIGN_OR_RETURN(m->plan_, plan_residency(*m->layout_, options.memory_bytes, m->plan_options_));
  m->plan_options_.routing = nullptr;  // (not owned; not kept)
  if (options.memory_bytes == 0) {
    NJ_ASSIGN_OR_RETURN(m->source_, ResidentSource::open(*m->index_, *m->layout_));
  } else {
    NJ_ASSIGN_OR_RETURN(
        m->source_, StreamingSource::open(*m->index_, *m->layout_, m->plan_, options.streaming));
  }
  m->fingerprint_ = model_fingerprint(m->config_, *m->index_);
  return m;
}

}  // namespace nj
