// Model::open: config → index → layout → weights.
#include "engine/runtime/model.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "engine/io/env.h"
#include "engine/weights/pack.h"
#include "engine/weights/resident_source.h"

namespace nj {

Result<ModelHeaders> open_model_headers(const std::string& dir, bool use_pack,
                                        std::string* pack_warning, const std::string& pack_dir,
                                        int index_threads) {
  ModelHeaders h;
  NJ_ASSIGN_OR_RETURN(h.config, load_model_config(dir));
  NJ_ASSIGN_OR_RETURN(TensorIndex index, TensorIndex::open(dir, index_threads));
  h.index = std::make_unique<TensorIndex>(std::move(index));
  NJ_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::build(h.config, *h.index));
  h.layout = std::make_unique<ModelLayout>(std::move(layout));
  if (use_pack) {
    NJ_ASSIGN_OR_RETURN(
        h.uses_pack,
        use_trunk_pack(*Env::posix(), pack_dir.empty() ? dir : pack_dir, *h.index, h.layout.get(),
                       static_cast<uint32_t>(h.index->files().size()), pack_warning));
  }
  return h;
}

Result<std::unique_ptr<Model>> Model::open(const std::string& dir, const ModelOptions& options) {
  std::string reason;
  NJ_ASSIGN_OR_RETURN(ModelHeaders headers, open_model_headers(dir, options.use_pack, &reason,
                                                               options.pack_dir,
                                                               options.index_threads));
  if (!reason.empty()) spdlog::warn("not using the packed trunk: {}", reason);
  ModelPlan plan;
  plan.options = options.plan;
  plan.options.io_threads = options.streaming.io_threads;  // one block staging buffer each
  NJ_ASSIGN_OR_RETURN(plan.residency,
                      plan_residency(*headers.layout, options.memory_bytes, plan.options));
  plan.batch = std::max(1, plan.options.batch);
  plan.requested_batch = plan.options.batch;
  plan.max_batch = plan.residency.max_batch;
  plan.asked_draft_tokens = plan.options.draft_tokens;
  plan.pass_cost = pass_cost(*headers.layout, plan.residency);
  return open(dir, std::move(headers), plan, options.memory_bytes, options.streaming);
}

Result<std::unique_ptr<Model>> Model::open(const std::string& dir, ModelHeaders headers,
                                           const ModelPlan& plan, uint64_t memory_bytes,
                                           const StreamingOptions& streaming) {
  std::unique_ptr<Model> m(new Model());
  m->dir_ = dir;
  m->config_ = headers.config;
  m->index_ = std::move(headers.index);
  m->layout_ = std::move(headers.layout);
  m->uses_pack_ = headers.uses_pack;
  m->plan_ = plan;
  m->plan_.options.routing = nullptr;  // (not owned; not kept)
  if (memory_bytes == 0) {
    NJ_ASSIGN_OR_RETURN(m->source_, ResidentSource::open(*m->index_, *m->layout_));
  } else {
    NJ_ASSIGN_OR_RETURN(m->source_, StreamingSource::open(*m->index_, *m->layout_,
                                                          m->plan_.residency, streaming));
  }
  m->fingerprint_ = model_fingerprint(m->config_, *m->index_);
  return m;
}

}  // namespace nj
