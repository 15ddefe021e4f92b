// Which idle expert a full cache drops. The streaming source keeps, per MoE layer, up to
// the planned number of idle experts in memory; when a buffer is needed and none is free,
// the policy picks the victim among the idle ones. LRU to start; the interface lets a
// frequency- or router-aware policy replace it without touching the I/O code.
#pragma once

#include <cstdint>
#include <span>

namespace nj {

struct ExpertCandidate {
  int buffer = 0;         // pool index
  int layer = 0;
  int expert = 0;
  uint64_t last_use = 0;  // logical clock of the last acquire
  uint64_t uses = 0;      // acquires since it was loaded
};

class ExpertCachePolicy {
 public:
  virtual ~ExpertCachePolicy() = default;
  // Returns the index into `candidates` to evict. REQUIRES: !candidates.empty().
  virtual size_t choose_victim(std::span<const ExpertCandidate> candidates) const = 0;
  virtual const char* name() const = 0;
};

// Least recently used first; ties to the lower buffer index (deterministic).
class LruExpertPolicy final : public ExpertCachePolicy {
 public:
  size_t choose_victim(std::span<const ExpertCandidate> candidates) const override;
  const char* name() const override { return "lru"; }
};

}  // namespace nj
