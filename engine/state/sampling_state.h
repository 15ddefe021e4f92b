// What a sampler is, as plain data: its settings and its RNG's whole state. A state
// checkpoint saves both (state_file.h), so a resumed generation draws exactly the numbers
// the uninterrupted one would have; the Sampler that uses them is engine/session/sampler.h.
#pragma once

#include <cstdint>

#include "engine/util/status.h"

namespace nj {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties to the lowest id)
  int top_k = 0;             // keep the k most likely ids; 0 = no limit
  float top_p = 1.0f;        // keep the smallest set whose probability reaches top_p; 1 = no limit
  uint64_t seed = 0;         // initial RNG state
};

// Validates ranges: temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1.
Status validate_sampling(const SamplingParams& p);

// SplitMix64: the state is one 64-bit counter; each draw advances it by a constant.
struct RngState {
  uint64_t s = 0;
};

}  // namespace nj
