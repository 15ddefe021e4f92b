// Validation of sampling settings (sampling_state.h).
#include "engine/state/sampling_state.h"

#include <cmath>
#include <string>

namespace nj {

Status validate_sampling(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return invalid_argument("temperature must be a finite number >= 0, not " + std::to_string(p.temperature));
  if (p.top_k < 0) return invalid_argument("top_k must be >= 0, not " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return invalid_argument("top_p must be in (0, 1], not " + std::to_string(p.top_p));
  return Status();
}

}  // namespace nj
