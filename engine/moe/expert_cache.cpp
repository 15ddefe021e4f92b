// LRU expert eviction.
#include "engine/moe/expert_cache.h"

namespace nj {

size_t LruExpertPolicy::choose_victim(std::span<const ExpertCandidate> c) const {
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i) {
    if (c[i].last_use < c[best].last_use || (c[i].last_use == c[best].last_use && c[i].buffer < c[best].buffer))
      best = i;
  }
  return best;
}

}  // namespace nj
