// The byte cost of a pass by its rows, from the residency plan.
#include "engine/spec/pass_cost.h"

#include <algorithm>

namespace nj {

double PassCost::bytes(int rows) const {
  return fixed_bytes +
         expert_bytes * expected_distinct_experts(num_experts, top_k, std::max(1, rows));
}

double PassCost::relative(int rows, int base_rows) const {
  const double base = bytes(base_rows);
  return base > 0 ? bytes(rows) / base : 1.0;
}

PassCost pass_cost(const ModelLayout& layout, const ResidencyPlan& plan) {
  const ModelConfig& c = layout.config();
  PassCost p;
  p.num_experts = c.num_experts;
  p.top_k = c.top_k;
  int moe_layers = 0;
  for (int l = 0; l < c.layers; ++l) moe_layers += c.is_dense(l) ? 0 : 1;
  if (plan.everything_resident) {
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

}  // namespace nj
