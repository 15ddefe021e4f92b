// The expert cache of a streamed model: a pool of one-expert buffers shared by the MoE
// layers. When a layer's router announces its experts (all the rows of a pass at once),
// the misses are read into free buffers, as many at once as buffers allow; as experts are
// released, each layer keeps up to its planned number of idle ones (the cache proper) and
// the rest go back to the pool for the next misses. Which idle expert a full cache drops is
// the policy's choice: LRU to start; the interface lets a frequency- or router-aware policy
// replace it without touching the I/O code.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/io/file.h"
#include "engine/io/read_pool.h"
#include "engine/model/layout.h"
#include "engine/util/status.h"

namespace nj {

struct ExpertCandidate {
  int buffer = 0;  // pool index
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

// What the cache has done so far.
struct ExpertCacheStats {
  uint64_t bytes_read = 0;
  uint64_t hits = 0, misses = 0;
  std::vector<uint64_t> layer_hits, layer_misses;  // [layers]
};

class ExpertCache {
 public:
  // Starts reading a unit into a buffer; the source owns the files and the read pool.
  using ReadUnit =
      std::function<std::shared_ptr<ReadTicket>(const UnitLayout&, uint8_t* buffer, ReadPriority)>;
  // Waits for a read the caller needs now (and counts the wait).
  using Await = std::function<Status(const std::shared_ptr<ReadTicket>&)>;

  // `buffers` buffers of `buffer_bytes`; `cache_slots[l]` idle experts layer l may keep.
  // `layout` must outlive the cache.
  ExpertCache(const ModelLayout& layout, int buffers, uint64_t buffer_bytes,
              std::vector<int> cache_slots, std::shared_ptr<const ExpertCachePolicy> policy,
              ReadUnit read, Await await);

  // Announces the experts layer l is about to acquire; misses start reading now.
  void will_need(int l, std::span<const int> experts);
  // Expert e of layer l, read if needed; the bytes stay pinned until the result is released.
  // Errors: the read's (IOError naming the file and offset). Thread-safe.
  Result<std::shared_ptr<const ExpertWeights>> acquire(int l, int e);
  // Whether expert e of layer l is in a buffer and read (acquire would not wait). Thread-safe.
  bool loaded(int l, int e) const;
  ExpertCacheStats stats() const;

 private:
  struct Buffer {
    uint8_t* bytes = nullptr;     // its stride of slab_
    int layer = -1, expert = -1;  // -1: free
    std::shared_ptr<ReadTicket> ticket;
    std::shared_ptr<const ExpertWeights> view;
    int refs = 0;
    bool needed = false;  // announced for the layer now computing, not yet acquired
    bool hit = false;     // was resident when announced
    uint64_t last_use = 0, uses = 0;
  };
  int obtain_buffer_locked();
  void pump_locked(int layer);
  void issue_locked(int b, int layer, int e);
  void release(int b);

  const ModelLayout& layout_;
  std::vector<int> cache_slots_;
  std::shared_ptr<const ExpertCachePolicy> policy_;
  ReadUnit read_;
  Await await_;
  mutable std::mutex mu_;
  AlignedBuffer slab_;  // every buffer's bytes
  std::vector<Buffer> buffers_;
  std::vector<std::unordered_map<int, int>> where_;  // [layer]: expert → buffer
  std::vector<std::deque<int>> pending_;             // [layer]: announced, not yet issued
  uint64_t tick_ = 0;
  ExpertCacheStats stats_;
};

}  // namespace nj
