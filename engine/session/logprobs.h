// Log-probabilities of generated tokens (the OpenAI API's `logprobs` and `top_logprobs`):
// the log-softmax of the model's raw logits, before temperature, top-k or top-p, so they
// describe the model and not the sampling settings.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace nj {

struct TokenLogprobs {
  float logprob = 0;                           // of the generated id
  std::vector<std::pair<int32_t, float>> top;  // the most likely ids, most likely first
                                               // (ties: the lower id first)
};

// The log-probability of `id` and of the `top_k` most likely ids under `logits`. Computed in
// double in a fixed order (the same bits on every thread count and SIMD level), stored as
// float. NaN logits count as impossible (-inf), as the sampler never picks them.
// REQUIRES: 0 <= id < logits.size(); top_k >= 0.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_k);

}  // namespace nj
