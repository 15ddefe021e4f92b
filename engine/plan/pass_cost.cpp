// The cost model of a pass (see pass_cost.h).
#include "engine/plan/pass_cost.h"

#include <algorithm>
#include <initializer_list>

namespace nj {

double PassCost::bytes(int rows) const {
  return fixed_bytes +
         expert_bytes * expected_distinct_experts(num_experts, top_k, std::max(1, rows));
}

double PassCost::relative(int rows, int base_rows) const {
  const double base = bytes(base_rows);
  return base > 0 ? bytes(rows) / base : 1.0;
}

PassCost pass_cost(const ModelLayout& layout, const ResidencyPlan& plan, PassBytesSource source) {
  const ModelConfig& c = layout.config();
  PassCost p;
  p.num_experts = c.num_experts;
  p.top_k = c.top_k;
  int moe_layers = 0;
  for (int l = 0; l < c.layers; ++l) moe_layers += c.is_dense(l) ? 0 : 1;
  const bool memory = source == PassBytesSource::kMemory ||
                      (source == PassBytesSource::kPlan && plan.everything_resident);
  if (memory) {
    for (int l = 0; l < c.layers; ++l) p.fixed_bytes += static_cast<double>(layout.trunk_bytes(l));
    p.fixed_bytes += static_cast<double>(layout.head_bytes());
    p.expert_bytes = static_cast<double>(layout.expert_bytes()) * moe_layers;
    return p;
  }
  // The plan's step is one row per sequence of its batch: the trunk is read once, and the
  // expert bytes are its distinct experts' misses.
  p.fixed_bytes = static_cast<double>(plan.predicted_trunk_bytes_per_step);
  p.expert_bytes = plan.predicted_distinct_experts > 0
                       ? static_cast<double>(plan.predicted_expert_bytes_per_step) /
                             plan.predicted_distinct_experts
                       : 0.0;
  return p;
}

double break_even_acceptance(const PassCost& cost) {
  return cost.relative(2, 1) - 1.0;
}

bool speculation_pays(const PassCost& cost, const ResidencyPlan& plan) {
  return !plan.everything_resident && break_even_acceptance(cost) < 0.5;
}

namespace {

// Weight elements of the matrices among `slots` (vectors and absent tensors add nothing).
double matrix_elements(std::initializer_list<const TensorSlot*> slots) {
  double n = 0;
  for (const TensorSlot* s : slots)
    if (s->info != nullptr && s->rows > 1 && s->cols > 1)
      n += static_cast<double>(s->rows) * s->cols;
  return n;
}

double layer_elements(const LayerLayout& l) {
  double n = matrix_elements({&l.attn_res_proj, &l.mlp_res_proj});
  if (l.is_mla) {
    const MlaSlots& a = l.mla;
    // kv_b is applied per row and head inside the attention (absorbed form): element work.
    n += matrix_elements({&a.q_a, &a.q_b, &a.kv_a, &a.o, &a.g});
  } else {
    const KdaSlots& a = l.kda;
    n += matrix_elements({&a.q, &a.k, &a.v, &a.g, &a.o, &a.f_a, &a.f_b, &a.b});
  }
  if (l.is_dense) {
    n += matrix_elements({&l.dense.gate, &l.dense.up, &l.dense.down});
  } else {
    const MoeSlots& m = l.moe;
    n += matrix_elements({&m.router, &m.down, &m.up, &m.shared.gate, &m.shared.up, &m.shared.down});
  }
  return n;
}

// The element work of one row (pass_cost.h), in elements of each probed function.
struct ElementCounts {
  double situ = 0, sigmoid = 0, exp = 0, norm = 0, axpy = 0, dot = 0, top_k = 0;
  double seconds(const KernelRates::ElementRates& r) const {
    return situ * r.situ + sigmoid * r.sigmoid + exp * r.exp + norm * r.norm + axpy * r.axpy +
           dot * r.dot + top_k * r.top_k;
  }
};

// attn_res over n sources of `hidden` for one row.
void add_attn_res(ElementCounts& e, double n, double hidden) {
  e.dot += 2 * n * hidden;
  e.axpy += (n + 1) * hidden;
  e.exp += n;
}

}  // namespace

PassCostModel::PassCostModel(const ModelLayout& layout, const ResidencyPlan& plan,
                             const KernelRates& rates, double bandwidth_gbps,
                             const RoutingProfile* routing)
    : rates_(rates),
      routing_(routing),
      bandwidth_(bandwidth_gbps * 1e9),
      trunk_overlaps_(plan.ring_slots != 1) {
  const ModelConfig& c = layout.config();
  num_experts_ = c.num_experts;
  top_k_ = c.top_k;
  for (int l = 0; l < c.layers; ++l) {
    if (!c.is_dense(l)) moe_layer_ids_.push_back(l);
    trunk_elements_ += layer_elements(layout.layer(l));
    if (layout.layer(l).is_mla) kv_b_elements_ += matrix_elements({&layout.layer(l).mla.kv_b});
  }
  moe_layers_ = static_cast<int>(moe_layer_ids_.size());
  const HeadLayout& head = layout.head();
  trunk_elements_ += matrix_elements({&head.out_res_proj});
  head_elements_ = matrix_elements({&head.lm_head});
  if (moe_layers_ > 0) {
    expert_elements_ = 3.0 * c.latent * c.moe_inter;
    expert_format_ = c.mxfp4_experts ? ops::MatFormat::kMxfp4 : ops::MatFormat::kBF16;
  }
  kda_flops_per_row_ = 6.0 * c.kda_heads * c.kda_head_dim * c.kda_head_dim * c.num_kda_layers();
  mla_flops_per_position_ = 4.0 * c.heads * (c.kv_lora_rank + c.qk_rope) * c.num_mla_layers();

  // Element work per row, layer by layer as Forward::run does it (pass_cost.h).
  const KernelRates::ElementRates& er = rates.element;
  const double hidden = c.hidden, P = c.kda_width(), H = c.kda_heads, D = c.kda_head_dim;
  const double nh = c.heads, kvl = c.kv_lora_rank, k = c.top_k, lat = c.latent;
  ElementCounts serial;
  double parallel = 0;     // seconds per row, before the split over the threads
  double expert_situ = 0;  // the routed experts' SiTU, per row, before the split
  int nblocks = 0;
  for (int l = 0; l < c.layers; ++l) {
    if (nblocks > 0) add_attn_res(serial, nblocks + 1, hidden);
    if (l % std::max(1, c.attn_res_block_size) == 0) ++nblocks;
    add_attn_res(serial, nblocks + 1, hidden);
    serial.norm += 2 * hidden;
    serial.axpy += 4 * hidden;
    if (c.attention[static_cast<size_t>(l)] == AttentionKind::kMla) {
      serial.norm += c.q_lora_rank + kvl;
      serial.sigmoid += nh * c.v_head_dim;
      serial.axpy += nh * c.v_head_dim + c.qk_rope;
      parallel += nh * (c.qk_nope + c.v_head_dim) * kvl * er.matvec + nh * kvl * er.axpy;
    } else {
      serial.axpy += 3 * P * c.conv_kernel + 3 * P + 2 * P;
      serial.sigmoid += 3 * P + H + P + P;
      serial.exp += P;
      serial.norm += 3 * P;
      parallel += H * D * D * er.kda;
    }
    if (c.is_dense(l)) {
      serial.situ += c.dense_inter;
    } else {
      serial.sigmoid += c.num_experts;
      serial.top_k += c.num_experts;
      serial.axpy += 3 * k * lat + lat + (c.shared_inter() > 0 ? hidden : 0);
      serial.norm += lat;
      serial.situ += c.shared_inter();
      expert_situ += k * c.moe_inter * er.situ;
    }
  }
  add_attn_res(serial, nblocks + 1, hidden);  // the head's
  const double threads = std::max(1, rates.threads);
  element_row_serial_ = serial.seconds(er);
  element_row_parallel_ = parallel / threads;
  // The expert probe, when it ran for this model's experts, times them whole (their SiTU
  // included) as moe_forward groups them: all of a layer's experts in one group when none
  // is read during the pass, else each alone as its read arrives (kernel_rates.h).
  const KernelRates::ExpertRates& ex = rates.experts;
  use_expert_probe_ = moe_layers_ > 0 && ex.measured() && ex.latent == c.latent &&
                      ex.moe_inter == c.moe_inter && ex.mxfp4 == c.mxfp4_experts;
  experts_grouped_ = plan.everything_resident || plan.predicted_expert_bytes_per_step == 0;
  if (!use_expert_probe_) element_row_parallel_ += expert_situ / threads;
  element_position_ =
      c.num_mla_layers() * nh * ((kvl + c.qk_rope) * er.dot + er.exp + kvl * er.axpy) / threads;
  element_logits_row_ = hidden * er.norm + static_cast<double>(c.vocab) * (er.axpy + er.exp);

  // The plan's step is one row per sequence of its batch; take out its embedding rows and
  // its distinct experts to get the per-pass and per-expert parts.
  embedding_row_ = static_cast<double>(layout.embedding_row_bytes());
  const PassCost disk = pass_cost(layout, plan, PassBytesSource::kDisk);
  trunk_read_ = disk.fixed_bytes - plan.batch * embedding_row_;
  expert_miss_ = disk.expert_bytes;
  load_bytes_ = static_cast<double>(plan.pinned_bytes + plan.held_bytes);
  if (plan.everything_resident)
    load_bytes_ += static_cast<double>(layout.expert_bytes()) * c.num_experts * moe_layers_;
}

double PassCostModel::distinct_experts(int rows) const {
  if (moe_layers_ == 0) return 0.0;
  if (routing_ == nullptr) return expected_distinct_experts(num_experts_, top_k_, std::max(1, rows));
  double sum = 0;
  for (int l : moe_layer_ids_) {
    const double measured = routing_->expected_distinct(l, std::max(1, rows));
    sum += measured >= 0 ? measured : expected_distinct_experts(num_experts_, top_k_, std::max(1, rows));
  }
  return sum / moe_layers_;
}

PassPrediction PassCostModel::predict(const PassShape& pass) const {
  PassPrediction p;
  const int rows = std::max(1, pass.rows);
  const double distinct = distinct_experts(rows);
  p.disk_bytes = trunk_read_ + rows * embedding_row_ + distinct * expert_miss_;

  const double expert_rows = distinct > 0 ? static_cast<double>(rows) * top_k_ / distinct : 0.0;
  const double attention_flops =
      rows * kda_flops_per_row_ + pass.attended * mla_flops_per_position_;
  p.flops = 2.0 * rows * (trunk_elements_ + kv_b_elements_) +
            2.0 * pass.logits_rows * head_elements_ +
            2.0 * rows * top_k_ * moe_layers_ * expert_elements_ + attention_flops;
  p.element_seconds = rows * (element_row_serial_ + element_row_parallel_) +
                      pass.attended * element_position_ + pass.logits_rows * element_logits_row_;
  const double per_expert = use_expert_probe_
                                ? rates_.experts.seconds(experts_grouped_, expert_rows)
                                : rates_.seconds(expert_format_, expert_elements_, expert_rows);
  p.expert_seconds = moe_layers_ * distinct * per_expert;
  p.compute_seconds = rates_.seconds(ops::MatFormat::kBF16, trunk_elements_, rows) +
                      rates_.seconds(ops::MatFormat::kBF16, head_elements_, pass.logits_rows) +
                      p.expert_seconds + p.element_seconds;
  const double expert_bytes = distinct * expert_miss_;
  p.io_seconds = bandwidth_ > 0 ? p.disk_bytes / bandwidth_ : 0.0;
  p.expert_io_seconds = bandwidth_ > 0 ? expert_bytes / bandwidth_ : 0.0;
  const double trunk_io = p.io_seconds - p.expert_io_seconds;
  p.seconds = p.expert_io_seconds + (trunk_overlaps_ ? std::max(trunk_io, p.compute_seconds)
                                                     : trunk_io + p.compute_seconds);
  return p;
}

}  // namespace nj
