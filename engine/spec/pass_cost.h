// What a pass over the weights costs as a function of the rows it carries, relative to
// another pass, as the residency plan predicts it (planner.h): every streamed trunk unit
// once, whatever the rows, and per MoE layer the experts the rows route to, E·(1 − (1 −
// k/E)^rows) under uniform routing, less the cache's hits. A drafted token adds a row: it
// shares the trunk read and adds only its own experts. With every weight resident, the
// bytes a pass touches in memory stand in for bytes read (a pass of a few rows streams its
// weights from RAM); the model counts bytes only, not the compute of the extra rows.
//
// The same model decides whether speculation is worth turning on at a budget
// (speculation_pays): its gain depends on acceptance, its cost on this ratio.
#pragma once

#include "engine/model/layout.h"
#include "engine/plan/planner.h"

namespace nj {

struct PassCost {
  double fixed_bytes = 0;   // per pass: the streamed trunk (or, resident, the whole trunk)
  double expert_bytes = 0;  // per distinct expert a pass needs, summed over the MoE layers
  int num_experts = 0, top_k = 0;

  // Bytes of a pass of `rows` rows. REQUIRES: rows >= 1.
  double bytes(int rows) const;
  // bytes(rows) / bytes(base_rows); 1 when both are 0 (a model with nothing to read).
  double relative(int rows, int base_rows = 1) const;
};

// The cost model of `plan` (made for `layout`).
PassCost pass_cost(const ModelLayout& layout, const ResidencyPlan& plan);

// The acceptance rate at which one drafted token per pass breaks even: the relative cost
// of a second row, less one. Drafts accepted more often than this make a pass emit more
// tokens per byte read.
double break_even_acceptance(const PassCost& cost);

// The planner's default for `speculative:` in generate jobs: on when the plan streams
// weights (the run is disk-bound, so an extra row costs bytes, which this model predicts,
// rather than compute, which it does not) and one drafted token breaks even below 50 %
// acceptance, the acceptance prompt-lookup drafts reach on extraction-like text.
bool speculation_pays(const PassCost& cost, const ResidencyPlan& plan);

}  // namespace nj
