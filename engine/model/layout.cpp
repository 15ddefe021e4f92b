// ModelLayout: tensor names → validated slots → read extents; views over unit buffers.
#include "engine/model/layout.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "engine/io/file.h"

namespace nj {
namespace {

const std::string kPrefix = "language_model.model.";

enum DTypeSet : unsigned {
  kFloat = 1,  // F32, BF16 or F16
  kBytes = 2,  // U8
};

bool dtype_in(DType d, unsigned set) {
  if ((set & kFloat) && (d == DType::kF32 || d == DType::kBF16 || d == DType::kF16)) return true;
  if ((set & kBytes) && d == DType::kU8) return true;
  return false;
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Resolver {
 public:
  explicit Resolver(const TensorIndex& index) : index_(index) {}

  // Finds `name` with one of `shapes` (the first is the canonical one) and a dtype in `set`.
  Status need(const std::string& name, std::vector<std::vector<uint64_t>> shapes, unsigned set,
              TensorSlot* out) {
    const TensorInfo* t = index_.find(name);
    if (!t) return not_found("tensor '" + name + "' is missing from the model in " + index_.dir());
    const std::string where = index_.files()[t->file].path + ": tensor '" + name + "'";
    if (!dtype_in(t->dtype, set))
      return corruption(where + " has dtype " + dtype_name(t->dtype) + ", expected " +
                        (set == kBytes ? "U8" : "F32, BF16 or F16"));
    bool match = false;
    for (const auto& s : shapes) {
      if (s.size() != t->ndim) continue;
      bool same = true;
      for (size_t i = 0; i < s.size(); ++i) same = same && s[i] == t->shape[i];
      match = match || same;
    }
    if (!match) return corruption(where + " has shape " + t->shape_string() + ", expected " + shape_str(shapes[0]));
    out->info = t;
    out->rows = t->ndim >= 2 ? static_cast<int>(t->shape[0]) : 1;
    out->cols = static_cast<int>(t->numel() / static_cast<uint64_t>(std::max(out->rows, 1)));
    return Status();
  }

  // A vector with at least `min_values` elements, any shape (A_log ships padded).
  Status need_at_least(const std::string& name, uint64_t min_values, TensorSlot* out) {
    const TensorInfo* t = index_.find(name);
    if (!t) return not_found("tensor '" + name + "' is missing from the model in " + index_.dir());
    const std::string where = index_.files()[t->file].path + ": tensor '" + name + "'";
    if (!dtype_in(t->dtype, kFloat))
      return corruption(where + " has dtype " + dtype_name(t->dtype) + ", expected F32, BF16 or F16");
    if (t->numel() < min_values)
      return corruption(where + " has " + std::to_string(t->numel()) + " values, expected at least " +
                        std::to_string(min_values));
    out->info = t;
    out->rows = 1;
    out->cols = static_cast<int>(t->numel());
    return Status();
  }

  bool has(const std::string& name) const { return index_.find(name) != nullptr; }

 private:
  const TensorIndex& index_;
};

using U = uint64_t;

// Plans the reads of a unit: slots sorted by position, merged where their aligned ranges
// touch, each extent placed at an aligned buffer offset.
UnitLayout plan_unit(const TensorIndex& index, std::vector<TensorSlot*> slots) {
  UnitLayout unit;
  slots.erase(std::remove_if(slots.begin(), slots.end(), [](TensorSlot* s) { return !s->info; }), slots.end());
  std::sort(slots.begin(), slots.end(), [](const TensorSlot* a, const TensorSlot* b) {
    return a->info->file != b->info->file ? a->info->file < b->info->file : a->info->offset < b->info->offset;
  });
  for (TensorSlot* s : slots) {
    const TensorInfo& t = *s->info;
    unit.tensor_bytes += t.nbytes;
    const uint64_t file_size = index.files()[t.file].size;
    const uint64_t begin = align_down(t.offset, kDirectAlign);
    const uint64_t end = std::min(align_up(t.offset + t.nbytes, kDirectAlign), file_size);
    if (!unit.extents.empty()) {
      Extent& last = unit.extents.back();
      if (last.file == t.file && begin <= last.file_offset + last.length) {
        last.length = std::max(last.length, end - last.file_offset);
        s->buffer_offset = last.buffer_offset + (t.offset - last.file_offset);
        continue;
      }
    }
    Extent e;
    e.file = t.file;
    e.file_offset = begin;
    e.length = end - begin;
    e.buffer_offset = unit.extents.empty()
                          ? 0
                          : align_up(unit.extents.back().buffer_offset + unit.extents.back().length, kDirectAlign);
    unit.extents.push_back(e);
    s->buffer_offset = e.buffer_offset + (t.offset - begin);
  }
  if (!unit.extents.empty())
    unit.buffer_bytes = align_up(unit.extents.back().buffer_offset + unit.extents.back().length, kDirectAlign);
  return unit;
}

Status resolve_kda(Resolver& r, const ModelConfig& c, const std::string& p, KdaSlots* s) {
  const U hid = static_cast<U>(c.hidden), P = static_cast<U>(c.kda_width()), D = static_cast<U>(c.kda_head_dim),
          H = static_cast<U>(c.kda_heads), K = static_cast<U>(c.conv_kernel);
  NJ_RETURN_IF_ERROR(r.need(p + "q_proj.weight", {{P, hid}}, kFloat, &s->q));
  NJ_RETURN_IF_ERROR(r.need(p + "k_proj.weight", {{P, hid}}, kFloat, &s->k));
  NJ_RETURN_IF_ERROR(r.need(p + "v_proj.weight", {{P, hid}}, kFloat, &s->v));
  NJ_RETURN_IF_ERROR(r.need(p + "g_proj.weight", {{P, hid}}, kFloat, &s->g));
  NJ_RETURN_IF_ERROR(r.need(p + "o_proj.weight", {{hid, P}}, kFloat, &s->o));
  NJ_RETURN_IF_ERROR(r.need(p + "f_a_proj.weight", {{D, hid}}, kFloat, &s->f_a));
  NJ_RETURN_IF_ERROR(r.need(p + "f_b_proj.weight", {{P, D}}, kFloat, &s->f_b));
  NJ_RETURN_IF_ERROR(r.need(p + "b_proj.weight", {{H, hid}}, kFloat, &s->b));
  NJ_RETURN_IF_ERROR(r.need(p + "q_conv1d.weight", {{P, 1, K}, {P, K}}, kFloat, &s->q_conv));
  NJ_RETURN_IF_ERROR(r.need(p + "k_conv1d.weight", {{P, 1, K}, {P, K}}, kFloat, &s->k_conv));
  NJ_RETURN_IF_ERROR(r.need(p + "v_conv1d.weight", {{P, 1, K}, {P, K}}, kFloat, &s->v_conv));
  NJ_RETURN_IF_ERROR(r.need_at_least(p + "A_log", H, &s->a_log));
  NJ_RETURN_IF_ERROR(r.need(p + "dt_bias", {{P}}, kFloat, &s->dt_bias));
  NJ_RETURN_IF_ERROR(r.need(p + "o_norm.weight", {{D}}, kFloat, &s->o_norm));
  return Status();
}

Status resolve_mla(Resolver& r, const ModelConfig& c, const std::string& p, MlaSlots* s) {
  const U hid = static_cast<U>(c.hidden), ql = static_cast<U>(c.q_lora_rank), kvl = static_cast<U>(c.kv_lora_rank),
          nh = static_cast<U>(c.heads), nope = static_cast<U>(c.qk_nope), rope = static_cast<U>(c.qk_rope),
          vd = static_cast<U>(c.v_head_dim);
  NJ_RETURN_IF_ERROR(r.need(p + "q_a_proj.weight", {{ql, hid}}, kFloat, &s->q_a));
  NJ_RETURN_IF_ERROR(r.need(p + "q_a_layernorm.weight", {{ql}}, kFloat, &s->q_a_norm));
  NJ_RETURN_IF_ERROR(r.need(p + "q_b_proj.weight", {{nh * (nope + rope), ql}}, kFloat, &s->q_b));
  NJ_RETURN_IF_ERROR(r.need(p + "kv_a_proj_with_mqa.weight", {{kvl + rope, hid}}, kFloat, &s->kv_a));
  NJ_RETURN_IF_ERROR(r.need(p + "kv_a_layernorm.weight", {{kvl}}, kFloat, &s->kv_a_norm));
  NJ_RETURN_IF_ERROR(r.need(p + "kv_b_proj.weight", {{nh * (nope + vd), kvl}}, kFloat, &s->kv_b));
  NJ_RETURN_IF_ERROR(r.need(p + "o_proj.weight", {{hid, nh * vd}}, kFloat, &s->o));
  if (c.mla_output_gate) NJ_RETURN_IF_ERROR(r.need(p + "g_proj.weight", {{nh * vd, hid}}, kFloat, &s->g));
  return Status();
}

Status resolve_ffn(Resolver& r, const std::string& p, U hidden, U inter, FfnSlots* s) {
  NJ_RETURN_IF_ERROR(r.need(p + "gate_proj.weight", {{inter, hidden}}, kFloat, &s->gate));
  NJ_RETURN_IF_ERROR(r.need(p + "up_proj.weight", {{inter, hidden}}, kFloat, &s->up));
  NJ_RETURN_IF_ERROR(r.need(p + "down_proj.weight", {{hidden, inter}}, kFloat, &s->down));
  return Status();
}

Status resolve_expert(Resolver& r, const ModelConfig& c, const std::string& p, ExpertLayout* e) {
  const U lat = static_cast<U>(c.latent), mi = static_cast<U>(c.moe_inter);
  e->mxfp4 = c.mxfp4_experts;
  if (e->mxfp4) {
    if (!r.has(p + "w1.weight_packed") && r.has(p + "w1.weight"))
      return corruption("tensor '" + p + "w1.weight' is unquantized but config.json declares MXFP4 experts");
    NJ_RETURN_IF_ERROR(r.need(p + "w1.weight_packed", {{mi, lat / 2}}, kBytes, &e->w1));
    NJ_RETURN_IF_ERROR(r.need(p + "w1.weight_scale", {{mi, lat / 32}}, kBytes, &e->w1_scale));
    NJ_RETURN_IF_ERROR(r.need(p + "w2.weight_packed", {{lat, mi / 2}}, kBytes, &e->w2));
    NJ_RETURN_IF_ERROR(r.need(p + "w2.weight_scale", {{lat, mi / 32}}, kBytes, &e->w2_scale));
    NJ_RETURN_IF_ERROR(r.need(p + "w3.weight_packed", {{mi, lat / 2}}, kBytes, &e->w3));
    NJ_RETURN_IF_ERROR(r.need(p + "w3.weight_scale", {{mi, lat / 32}}, kBytes, &e->w3_scale));
  } else {
    if (r.has(p + "w1.weight_packed") && !r.has(p + "w1.weight"))
      return corruption("tensor '" + p + "w1.weight_packed' is MXFP4 but config.json has no quantization_config");
    NJ_RETURN_IF_ERROR(r.need(p + "w1.weight", {{mi, lat}}, kFloat, &e->w1));
    NJ_RETURN_IF_ERROR(r.need(p + "w2.weight", {{lat, mi}}, kFloat, &e->w2));
    NJ_RETURN_IF_ERROR(r.need(p + "w3.weight", {{mi, lat}}, kFloat, &e->w3));
  }
  return Status();
}

// --- materialization ---

ops::MatFormat format_of(DType d) {
  switch (d) {
    case DType::kBF16: return ops::MatFormat::kBF16;
    case DType::kF16: return ops::MatFormat::kF16;
    default: return ops::MatFormat::kF32;
  }
}

MatRef mat(const TensorSlot& s, const uint8_t* buf) {
  MatRef m;
  if (!s.info) return m;
  m.format = format_of(s.info->dtype);
  m.rows = s.rows;
  m.cols = s.cols;
  m.data = buf + s.buffer_offset;
  return m;
}

MatRef mxfp4(const TensorSlot& packed, const TensorSlot& scale, const uint8_t* buf) {
  MatRef m;
  m.format = ops::MatFormat::kMxfp4;
  m.rows = packed.rows;
  m.cols = packed.cols * 2;
  m.data = buf + packed.buffer_offset;
  m.scales = buf + scale.buffer_offset;
  return m;
}

// Widens small vectors into one owned array; pointers are handed out after sizing.
class VectorArena {
 public:
  void reserve(size_t n) { sizes_ += n; }
  void allocate(std::vector<float>* owned) {
    owned->assign(sizes_, 0.0f);
    base_ = owned->data();
  }
  const float* widen(const TensorSlot& s, const uint8_t* buf, size_t n) {
    float* dst = base_ + used_;
    widen_to_f32(s.info->dtype, buf + s.buffer_offset, n, dst);
    used_ += n;
    return dst;
  }
  // w_norm ⊙ w_proj, folded once (k3-model.md §2).
  const float* fold(const TensorSlot& norm, const TensorSlot& proj, const uint8_t* buf, size_t n) {
    float* dst = base_ + used_;
    widen_to_f32(norm.info->dtype, buf + norm.buffer_offset, n, dst);
    std::vector<float> p(n);
    widen_to_f32(proj.info->dtype, buf + proj.buffer_offset, n, p.data());
    for (size_t i = 0; i < n; ++i) dst[i] = dst[i] * p[i];
    used_ += n;
    return dst;
  }

 private:
  size_t sizes_ = 0, used_ = 0;
  float* base_ = nullptr;
};

}  // namespace

Result<ModelLayout> ModelLayout::build(const ModelConfig& c, const TensorIndex& index) {
  ModelLayout m;
  m.config_ = c;
  Resolver r(index);
  const U hid = static_cast<U>(c.hidden);
  m.layers_.resize(static_cast<size_t>(c.layers));
  m.experts_.resize(static_cast<size_t>(c.layers));
  for (int l = 0; l < c.layers; ++l) {
    LayerLayout& L = m.layers_[static_cast<size_t>(l)];
    L.layer = l;
    const std::string p = kPrefix + "layers." + std::to_string(l) + ".";
    NJ_RETURN_IF_ERROR(r.need(p + "input_layernorm.weight", {{hid}}, kFloat, &L.input_norm));
    NJ_RETURN_IF_ERROR(r.need(p + "post_attention_layernorm.weight", {{hid}}, kFloat, &L.post_norm));
    NJ_RETURN_IF_ERROR(r.need(p + "self_attention_res_norm.weight", {{hid}}, kFloat, &L.attn_res_norm));
    NJ_RETURN_IF_ERROR(r.need(p + "self_attention_res_proj.weight", {{1, hid}, {hid}}, kFloat, &L.attn_res_proj));
    NJ_RETURN_IF_ERROR(r.need(p + "mlp_res_norm.weight", {{hid}}, kFloat, &L.mlp_res_norm));
    NJ_RETURN_IF_ERROR(r.need(p + "mlp_res_proj.weight", {{1, hid}, {hid}}, kFloat, &L.mlp_res_proj));
    L.is_mla = c.attention[static_cast<size_t>(l)] == AttentionKind::kMla;
    if (L.is_mla) NJ_RETURN_IF_ERROR(resolve_mla(r, c, p + "self_attn.", &L.mla));
    else NJ_RETURN_IF_ERROR(resolve_kda(r, c, p + "self_attn.", &L.kda));
    L.is_dense = c.is_dense(l);
    if (L.is_dense) {
      NJ_RETURN_IF_ERROR(resolve_ffn(r, p + "mlp.", hid, static_cast<U>(c.dense_inter), &L.dense));
    } else {
      const std::string q = p + "block_sparse_moe.";
      const U E = static_cast<U>(c.num_experts), lat = static_cast<U>(c.latent);
      MoeSlots& e = L.moe;
      NJ_RETURN_IF_ERROR(r.need(q + "gate.weight", {{E, hid}}, kFloat, &e.router));
      NJ_RETURN_IF_ERROR(r.need(q + "gate.e_score_correction_bias", {{E}}, kFloat, &e.bias));
      NJ_RETURN_IF_ERROR(r.need(q + "routed_expert_down_proj.weight", {{lat, hid}}, kFloat, &e.down));
      NJ_RETURN_IF_ERROR(r.need(q + "routed_expert_up_proj.weight", {{hid, lat}}, kFloat, &e.up));
      if (c.latent_norm) NJ_RETURN_IF_ERROR(r.need(q + "routed_expert_norm.weight", {{lat}}, kFloat, &e.norm));
      if (c.num_shared > 0)
        NJ_RETURN_IF_ERROR(resolve_ffn(r, q + "shared_experts.", hid, static_cast<U>(c.shared_inter()), &e.shared));
      auto& experts = m.experts_[static_cast<size_t>(l)];
      experts.resize(static_cast<size_t>(c.num_experts));
      for (int x = 0; x < c.num_experts; ++x) {
        ExpertLayout& ex = experts[static_cast<size_t>(x)];
        NJ_RETURN_IF_ERROR(resolve_expert(r, c, q + "experts." + std::to_string(x) + ".", &ex));
        ex.unit = plan_unit(index, {&ex.w1, &ex.w1_scale, &ex.w2, &ex.w2_scale, &ex.w3, &ex.w3_scale});
        m.expert_bytes_ = std::max(m.expert_bytes_, ex.unit.tensor_bytes);
      }
    }
    L.unit = plan_unit(index, trunk_slots(L));
  }
  const U V = static_cast<U>(c.vocab);
  NJ_RETURN_IF_ERROR(r.need(kPrefix + "embed_tokens.weight", {{V, hid}}, kFloat, &m.embed_));
  HeadLayout& h = m.head_;
  NJ_RETURN_IF_ERROR(r.need(kPrefix + "norm.weight", {{hid}}, kFloat, &h.norm));
  NJ_RETURN_IF_ERROR(r.need(kPrefix + "output_attn_res_norm.weight", {{hid}}, kFloat, &h.out_res_norm));
  NJ_RETURN_IF_ERROR(r.need(kPrefix + "output_attn_res_proj.weight", {{1, hid}, {hid}}, kFloat, &h.out_res_proj));
  if (c.tie_word_embeddings && !r.has("language_model.lm_head.weight"))
    NJ_RETURN_IF_ERROR(r.need(kPrefix + "embed_tokens.weight", {{V, hid}}, kFloat, &h.lm_head));
  else
    NJ_RETURN_IF_ERROR(r.need("language_model.lm_head.weight", {{V, hid}}, kFloat, &h.lm_head));
  h.unit = plan_unit(index, head_slots(h));
  return m;
}

std::vector<TensorSlot*> trunk_slots(LayerLayout& L) {
  std::vector<TensorSlot*> slots = {&L.input_norm, &L.post_norm, &L.attn_res_norm, &L.attn_res_proj,
                                    &L.mlp_res_norm, &L.mlp_res_proj};
  if (L.is_mla) {
    MlaSlots& m = L.mla;
    for (TensorSlot* s : {&m.q_a, &m.q_a_norm, &m.q_b, &m.kv_a, &m.kv_a_norm, &m.kv_b, &m.o, &m.g}) slots.push_back(s);
  } else {
    KdaSlots& k = L.kda;
    for (TensorSlot* s : {&k.q, &k.k, &k.v, &k.g, &k.o, &k.f_a, &k.f_b, &k.b, &k.q_conv, &k.k_conv, &k.v_conv,
                          &k.a_log, &k.dt_bias, &k.o_norm})
      slots.push_back(s);
  }
  if (L.is_dense) {
    for (TensorSlot* s : {&L.dense.gate, &L.dense.up, &L.dense.down}) slots.push_back(s);
  } else {
    MoeSlots& e = L.moe;
    for (TensorSlot* s : {&e.router, &e.bias, &e.down, &e.up, &e.norm, &e.shared.gate, &e.shared.up, &e.shared.down})
      slots.push_back(s);
  }
  return slots;
}

std::vector<TensorSlot*> head_slots(HeadLayout& h) { return {&h.norm, &h.out_res_norm, &h.out_res_proj, &h.lm_head}; }

namespace {

// lm_head's rows of part k of n: near-equal, the first `vocab % n` parts one row longer.
std::pair<int, int> part_rows(int vocab, int n, int k) {
  const int base = vocab / n, extra = vocab % n;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

}  // namespace

std::vector<HeadPart> split_head(const HeadLayout& head, const TensorIndex& index, int parts) {
  const TensorInfo& whole = *head.lm_head.info;
  const int vocab = head.lm_head.rows;
  const uint64_t row_bytes = whole.nbytes / static_cast<uint64_t>(vocab);
  std::vector<HeadPart> out(static_cast<size_t>(parts));
  for (int k = 0; k < parts; ++k) {
    HeadPart& p = out[static_cast<size_t>(k)];
    std::tie(p.first_row, p.rows) = part_rows(vocab, parts, k);
    auto info = std::make_shared<TensorInfo>(whole);
    info->offset = whole.offset + static_cast<uint64_t>(p.first_row) * row_bytes;
    info->nbytes = static_cast<uint64_t>(p.rows) * row_bytes;
    info->shape[0] = static_cast<uint32_t>(p.rows);
    p.layout = head;
    if (k > 0) p.layout.norm = p.layout.out_res_norm = p.layout.out_res_proj = TensorSlot{};
    p.layout.lm_head.info = info.get();
    p.layout.lm_head.rows = p.rows;
    p.lm_head = std::move(info);
    p.layout.unit = plan_unit(index, head_slots(p.layout));
  }
  return out;
}

uint64_t head_part_buffer_bound(const HeadLayout& head, int parts) {
  // Each tensor's aligned range spans at most its bytes plus one alignment block on each side.
  auto bound = [](uint64_t bytes) { return align_up(bytes, kDirectAlign) + 2 * kDirectAlign; };
  const TensorInfo& lm = *head.lm_head.info;
  const int vocab = head.lm_head.rows;
  const uint64_t rows = static_cast<uint64_t>(part_rows(vocab, parts, 0).second);
  uint64_t bytes = bound(rows * (lm.nbytes / static_cast<uint64_t>(vocab)));
  for (const TensorSlot* s : {&head.norm, &head.out_res_norm, &head.out_res_proj})
    if (s->info) bytes += bound(s->info->nbytes);
  return bytes;
}

std::vector<std::string> ModelLayout::file_paths(const TensorIndex& index) const {
  std::vector<std::string> paths;
  for (const auto& f : index.files()) paths.push_back(f.path);
  paths.insert(paths.end(), extra_files_.begin(), extra_files_.end());
  return paths;
}

const ExpertLayout& ModelLayout::expert(int layer, int e) const {
  const auto& v = experts_[static_cast<size_t>(layer)];
  NJ_CHECK(!v.empty());
  return v[static_cast<size_t>(e)];
}

uint64_t ModelLayout::embedding_row_bytes() const {
  return static_cast<uint64_t>(config_.hidden) * dtype_size(embed_.info->dtype);
}

LayerWeights materialize_layer(const ModelConfig& c, const LayerLayout& l, const uint8_t* buf) {
  LayerWeights w;
  w.layer = l.layer;
  w.is_mla = l.is_mla;
  w.is_dense = l.is_dense;
  const size_t hid = static_cast<size_t>(c.hidden);
  VectorArena a;
  a.reserve(4 * hid);
  const size_t P = static_cast<size_t>(c.kda_width()), K = static_cast<size_t>(c.conv_kernel);
  if (l.is_mla) a.reserve(static_cast<size_t>(c.q_lora_rank + c.kv_lora_rank));
  else a.reserve(3 * P * K + static_cast<size_t>(c.kda_heads) + P + static_cast<size_t>(c.kda_head_dim));
  if (!l.is_dense) a.reserve(static_cast<size_t>(c.num_experts + c.latent));
  a.allocate(&w.owned);

  w.input_norm = a.widen(l.input_norm, buf, hid);
  w.post_norm = a.widen(l.post_norm, buf, hid);
  w.attn_res = a.fold(l.attn_res_norm, l.attn_res_proj, buf, hid);
  w.mlp_res = a.fold(l.mlp_res_norm, l.mlp_res_proj, buf, hid);
  if (l.is_mla) {
    const MlaSlots& s = l.mla;
    w.mla.q_a_proj = mat(s.q_a, buf);
    w.mla.q_a_norm = a.widen(s.q_a_norm, buf, static_cast<size_t>(c.q_lora_rank));
    w.mla.q_b_proj = mat(s.q_b, buf);
    w.mla.kv_a_proj = mat(s.kv_a, buf);
    w.mla.kv_a_norm = a.widen(s.kv_a_norm, buf, static_cast<size_t>(c.kv_lora_rank));
    w.mla.kv_b_proj = mat(s.kv_b, buf);
    w.mla.o_proj = mat(s.o, buf);
    w.mla.g_proj = mat(s.g, buf);
  } else {
    const KdaSlots& s = l.kda;
    KdaWeights& k = w.kda;
    k.q_proj = mat(s.q, buf);
    k.k_proj = mat(s.k, buf);
    k.v_proj = mat(s.v, buf);
    k.g_proj = mat(s.g, buf);
    k.o_proj = mat(s.o, buf);
    k.f_a_proj = mat(s.f_a, buf);
    k.f_b_proj = mat(s.f_b, buf);
    k.b_proj = mat(s.b, buf);
    k.q_conv = a.widen(s.q_conv, buf, P * K);
    k.k_conv = a.widen(s.k_conv, buf, P * K);
    k.v_conv = a.widen(s.v_conv, buf, P * K);
    k.a_log = a.widen(s.a_log, buf, static_cast<size_t>(c.kda_heads));  // the first H values
    k.dt_bias = a.widen(s.dt_bias, buf, P);
    k.o_norm = a.widen(s.o_norm, buf, static_cast<size_t>(c.kda_head_dim));
  }
  if (l.is_dense) {
    w.dense = {mat(l.dense.gate, buf), mat(l.dense.up, buf), mat(l.dense.down, buf)};
  } else {
    const MoeSlots& s = l.moe;
    w.moe.router = mat(s.router, buf);
    w.moe.router_bias = a.widen(s.bias, buf, static_cast<size_t>(c.num_experts));
    w.moe.down_proj = mat(s.down, buf);
    w.moe.up_proj = mat(s.up, buf);
    if (s.norm.info) w.moe.latent_norm = a.widen(s.norm, buf, static_cast<size_t>(c.latent));
    w.moe.has_shared = s.shared.gate.info != nullptr;
    if (w.moe.has_shared) w.moe.shared = {mat(s.shared.gate, buf), mat(s.shared.up, buf), mat(s.shared.down, buf)};
  }
  return w;
}

ExpertWeights materialize_expert(const ExpertLayout& l, const uint8_t* buf) {
  if (l.mxfp4) return {mxfp4(l.w1, l.w1_scale, buf), mxfp4(l.w2, l.w2_scale, buf), mxfp4(l.w3, l.w3_scale, buf)};
  return {mat(l.w1, buf), mat(l.w2, buf), mat(l.w3, buf)};
}

HeadWeights materialize_head(const ModelConfig& c, const HeadLayout& l, const uint8_t* buf) {
  HeadWeights h;
  const size_t hid = static_cast<size_t>(c.hidden);
  VectorArena a;
  a.reserve(2 * hid);
  a.allocate(&h.owned);
  if (l.norm.info) {  // absent in the parts of a split head after the first
    h.norm = a.widen(l.norm, buf, hid);
    h.out_res = a.fold(l.out_res_norm, l.out_res_proj, buf, hid);
  }
  h.lm_head = mat(l.lm_head, buf);
  return h;
}

}  // namespace nj
