// Choosing the next token from logits: greedy, or temperature / top-k / top-p sampling
// with an explicit RNG whose whole state is one plain value (saved in state checkpoints,
// so a resumed generation draws exactly the numbers the uninterrupted one would have).
#pragma once

#include <cstdint>
#include <span>

#include "engine/util/status.h"

namespace nj {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties to the lowest id)
  int top_k = 0;             // keep the k most likely ids; 0 = no limit
  float top_p = 1.0f;        // keep the smallest set whose probability reaches top_p; 1 = no limit
  uint64_t seed = 0;         // initial RNG state
};

// Validates ranges: temperature >= 0, top_k >= 0, 0 < top_p <= 1.
Status validate_sampling(const SamplingParams& p);

// SplitMix64: the state is one 64-bit counter; each draw advances it by a constant.
struct RngState {
  uint64_t s = 0;
};

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
