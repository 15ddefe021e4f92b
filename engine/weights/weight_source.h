// Where the forward pass gets its weights. A layer asks for its tensors; it never knows
// whether they were resident, streamed from disk into a ring buffer, or served from the
// expert cache. The returned shared_ptr pins the bytes until it is released.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "engine/model/layout.h"
#include "engine/util/status.h"

namespace nj {

// What a source has done so far (the forward pass adds its own compute timings).
struct WeightStats {
  uint64_t trunk_bytes_read = 0;
  uint64_t expert_bytes_read = 0;
  uint64_t embedding_bytes_read = 0;
  uint64_t head_bytes_read = 0;
  uint64_t expert_hits = 0;
  uint64_t expert_misses = 0;
  double io_wait_s = 0;  // time a caller spent blocked waiting for bytes
  double read_s = 0;     // time reads were in flight (wall, any overlap counted once)
  // Lossless packs (pack.h): trunk_bytes_read and head_bytes_read count stored bytes; this
  // is what they decoded to. Without one it equals their sum.
  uint64_t trunk_raw_bytes = 0;
  uint64_t decoded_bytes = 0;  // stored bytes decoded, from disk or from RAM (held units)
  double decode_s = 0;         // thread time spent checking and decoding them, all I/O threads
  std::vector<uint64_t> layer_hits, layer_misses;  // per layer
};

// Every weight byte read from disk.
inline uint64_t weight_bytes_read(const WeightStats& s) {
  return s.trunk_bytes_read + s.expert_bytes_read + s.embedding_bytes_read + s.head_bytes_read;
}

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  virtual const ModelLayout& layout() const = 0;

  // Layer l's trunk (everything but routed experts). Errors: IOError naming file and offset.
  virtual Result<std::shared_ptr<const LayerWeights>> layer(int l) = 0;
  // One routed expert of layer l. REQUIRES: layer l is a MoE layer, 0 <= e < num_experts.
  virtual Result<std::shared_ptr<const ExpertWeights>> expert(int l, int e) = 0;
  // How many experts a caller may hold at once (results of expert() not yet released) while
  // the source keeps reading the rest of a layer's announced experts. Holding more is an
  // error for a source with a finite pool. Default: no limit.
  virtual int expert_hold_limit() const { return std::numeric_limits<int>::max(); }
  // Whether expert(l, e) would return without waiting for a read. Thread-safe.
  virtual bool expert_ready(int /*l*/, int /*e*/) const { return true; }
  // Final norms and lm_head, in head_parts() parts of lm_head's rows (HeadWeights::first_row):
  // a streamed head larger than a ring slot is read a part at a time (planner.h). Part 0
  // holds the final norms. REQUIRES: 0 <= part < head_parts().
  virtual int head_parts() const { return 1; }
  virtual Result<std::shared_ptr<const HeadWeights>> head(int part) = 0;
  // Embedding rows as F32: out [ids.size()][hidden]. InvalidArgument for an id >= vocab.
  virtual Status embed(std::span<const int32_t> ids, float* out) = 0;

  // Hints that these will be asked for soon; a streaming source starts reading them.
  // Never needed for correctness.
  virtual void will_need_layer(int /*l*/) {}
  virtual void will_need_experts(int /*l*/, std::span<const int> /*experts*/) {}
  // Marks the end of one forward step (a decoded token or a prefill chunk).
  virtual void end_step() {}

  virtual WeightStats stats() const { return {}; }
};

}  // namespace nj
