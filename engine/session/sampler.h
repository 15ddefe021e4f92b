// Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling
// with an explicit RNG whose whole state is one plain value (saved in state checkpoints,
// so a resumed generation draws exactly the numbers the uninterrupted one would have).
#pragma once

#include <cstdint>
#include <span>

#include "engine/state/sampling_state.h"
#include "engine/util/status.h"

namespace nj {

uint64_t rng_next(RngState& r);
// Uniform in [0, 1) with 53 random bits.
double rng_uniform(RngState& r);

// Index of the largest logit; ties to the lowest index. NaNs are never chosen.
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params), rng_{params.seed} {}

  // Picks the next id. Greedy draws no random numbers; otherwise exactly one per call.
  int32_t sample(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }
  RngState rng() const { return rng_; }
  void set_rng(RngState r) { rng_ = r; }

 private:
  SamplingParams params_;
  RngState rng_;
};

}  // namespace nj
