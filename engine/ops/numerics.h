// The engine's numerics version: which arithmetic computes the logits. Two binaries with the
// same version give bit-identical logits for the same model and tokens (every canonical
// order of the kernels, reductions and formulas is the same); a different version may differ
// in any bit. Bump it, and say why below, whenever a change can move any logit bit: a new
// canonical order of a kernel (as the MXFP4 chunk order was), another reduction tree, another
// formula for a layer. Refactors, new SIMD paths that follow the canonical order, and speed
// work that keeps the bits do not bump it.
//
// It is recorded in every state checkpoint (engine/state/state_file.h, format 2) and, per
// item, in the job store (schemas/007_numerics_version.sql). A checkpoint of another version
// is never continued: its state was computed by other arithmetic, and the tokens after it
// would match neither binary's uninterrupted run (runner/item_runner.h says what `run` does
// with such an item, docs/design/jobs.md "Engine numerics version" the policy).
//
// History:
//   1  the first recorded arithmetic: MXFP4 rows in chunks of 128 elements (b4d6423).
//      Checkpoints written before versions were recorded (state format 1) count as 0.
//   2  SiTU-GLU and every sigmoid of the forward pass (SiLU, the output gates, the router's
//      scores, KDA's beta and gate) are the engine's own (engine/ops/kernels_math.inc),
//      vectorised and the same on every SIMD level and C library, instead of libm's expf and
//      tanhf per element (SiTU was 18 % of a resident 64-row step on bench-8g). exp where its
//      result compounds (KDA's decay, the softmaxes) stays libm's expf: the engine's exp
//      (0.84 ulp) put tiny-sharded 1.08e-4 from the float64 reference, over the golden
//      tests' 1e-4, where glibc's correctly rounded expf stays within it.
//   3  LatentMoE sums a row's weighted expert outputs in ascending expert order, each added
//      as its expert's group finishes, instead of in the row's rank order after all experts:
//      a row no longer holds its top-k outputs apart ([rows][top_k][latent], 229 KB per row
//      at K3's shapes), which bounded the layer sweep's window (engine/sweep/sweep.h).
#pragma once

#include <cstdint>

namespace nj {

inline constexpr uint32_t kNumericsVersion = 3;

}  // namespace nj
