// LatentMoE (k3-model.md §6) over the rows of a pass: every row of every sequence is routed,
// each selected expert is acquired once and computed once for all the rows routed to it,
// and each row sums its experts' weighted outputs in ascending expert order, so that a row's
// result never depends on which other rows share the pass.
#pragma once

#include <cstdint>

#include "engine/model/config.h"
#include "engine/moe/moe_activations.h"
#include "engine/moe/routing_profile.h"
#include "engine/util/status.h"
#include "engine/weights/weight_source.h"
#include "engine/model/weights.h"

namespace nj {

struct MoeCounters {
  double wait_s = 0;                  // blocked acquiring experts
  uint64_t expert_computations = 0;   // (expert, pass) pairs computed
  int distinct_experts = 0;           // experts the last call needed
};

// Routes x [rows][hidden], computes the selected experts (acquired from `source`, in
// ascending expert order) and the shared expert: out [rows][hidden]. When `profile` is
// given, the experts this pass requests are recorded in it (counted when `count_routing`).
// Errors: the source's, when an expert cannot be read.
Status moe_forward(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source, const float* x,
                   int rows, float* out, MoeActivations& a, FfnActivations& ffn, MoeCounters* counters,
                   RoutingProfile* profile = nullptr, bool count_routing = false);

// moe_forward in two steps, for a caller that takes the output a few rows at a time (the
// layer sweep: its window's rows then need no [rows][hidden] output buffer). moe_experts
// routes x and sums each row's experts into a.acc [rows][latent]; moe_output then gives
// out [n][hidden] for rows first .. first + n (a.acc's and x's), in any pieces: each row's
// bits are moe_forward's.
Status moe_experts(const ModelConfig& c, int layer, const MoeWeights& w, WeightSource& source,
                   const float* x, int rows, MoeActivations& a, MoeCounters* counters,
                   RoutingProfile* profile = nullptr, bool count_routing = false);
void moe_output(const ModelConfig& c, const MoeWeights& w, const float* x, int first, int n,
                float* out, MoeActivations& a, FfnActivations& ffn);

}  // namespace nj
