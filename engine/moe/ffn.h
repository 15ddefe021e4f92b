// SiTU-GLU MLP (k3-model.md §3, §6): the dense layers' FFN and the MoE's shared expert.
#pragma once

#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/moe/moe_activations.h"

namespace nj {

// SiTU-GLU MLP: out = down(SiTU(gate x, up x)). x [rows][hidden] → out [rows][hidden], as
// many rows at once as `a` holds (any number of rows; the bits do not depend on the chunks).
void ffn_forward(const ModelConfig& c, const DenseFfnWeights& w, const float* x, int rows,
                 float* out, FfnActivations& a);

}  // namespace nj
