// The residency planner: turns a memory budget into where every weight byte lives.
//
// Per decoded token the model reads every trunk unit (each layer's non-expert tensors, and
// the head: final norms and lm_head) and top_k routed experts per MoE layer. Memory can hold
// some of that between tokens. Pinning a trunk unit saves its whole size per token for its
// size in memory (1 byte saved per byte held); an expert-cache slot saves an expert only
// when the router picks it again (top_k / num_experts per byte held, for uniform routing).
// So the plan fills the budget in that order:
//   1. the minimum: sequence state and scratch, a ring of two buffers the size of the
//      largest trunk unit (the next unit is read while one computes) and two expert
//      buffers (one reads while one computes): below it the disk would sit idle;
//   2. more expert buffers, up to top_k, so that a layer's misses are all read at once;
//   3. trunk units kept in memory: pinned (decoded), or, from a lossless pack, held as
//      their stored bytes and decoded on each use (trunk_residency.h chooses, by predicted
//      seconds saved per byte; without a lossless pack: pinned, largest first, since
//      pinning the largest also shrinks the ring);
//   4. expert-cache slots, spread evenly over the MoE layers.
// A lossless pack also needs one staging buffer per I/O thread (a stored block read before
// it is decoded into the ring): part of the minimum.
// The plan never changes the tokens: only where bytes come from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/read_pool.h"
#include "engine/model/layout.h"
#include "engine/model/trunk_residency.h"
#include "engine/moe/routing_profile.h"
#include "engine/util/status.h"

namespace nj {

struct PlanOptions {
  int prefill_chunk = 64;  // as SessionOptions: scratch grows with it
  int max_context =
      4096;  // positions of MLA cache reserved (the state grows 55 KB/position for K3)
  bool all_logits = false;  // `logits` keeps [chunk][vocab] rows
  int sequence_states = 1;  // sequence states held at once (a classification keeps the state
                            // after its prompt while it scores labels that share tokens: 2)
  int ring_slots = 2;       // trunk units in memory at once when streaming: one computes while the
                            // others read (2 is the least that overlaps; more reads further ahead)
  int min_expert_buffers = 2;   // expert buffers in the minimum (capped at top_k): how many of a
                                // layer's missing experts can be read at once at the minimum
  double bandwidth_gbps = 2.6;  // device read bandwidth for the predicted seconds per token
  // Lossless packs. Decode rate (decoded bytes per second on one I/O thread) in the cost
  // of holding a unit compressed; 8 GB/s is what the AVX-512 decoder measured here on one
  // core (tests/bench/run_lossless_bench.sh), so the model errs on the side of pinning.
  double decode_gbps = 8.0;
  PinCompressed pin_compressed = PinCompressed::kAuto;  // see trunk_residency.h
  int io_threads = kDefaultIoThreads;  // one staging buffer (one stored block) each
  // Measured routing of this workload; without it the cache prediction assumes uniform
  // routing (hit rate = slots / num_experts), which real routers usually beat.
  const RoutingProfile* routing = nullptr;
};

struct ResidencyPlan {
  uint64_t budget_bytes = 0;
  uint64_t min_memory_bytes = 0;  // the smallest budget this model runs in with these options
  bool everything_resident = false;

  // Trunk units: 0..layers-1 are the layers, `layers` is the head.
  std::vector<bool> pinned;      // [layers + 1]: decoded bytes kept in memory
  std::vector<bool> held;        // [layers + 1]: stored (lossless) bytes kept, decoded on use
  int ring_slots = 0;            // buffers for streamed trunk units (0 when all are pinned)
  uint64_t ring_slot_bytes = 0;  // the largest streamed unit

  int expert_buffers = 0;  // staging + cache: buffers of one expert each
  uint64_t expert_buffer_bytes = 0;
  std::vector<int> expert_cache_slots;  // [layers]: idle experts a layer may keep (0 for dense)

  uint64_t state_bytes = 0;    // sequence_states x the sequence state at max_context
  uint64_t scratch_bytes = 0;  // session scratch at prefill_chunk
  uint64_t staging_bytes = 0;  // lossless: one stored block per I/O thread (0 otherwise)
  uint64_t pinned_bytes = 0;
  uint64_t held_bytes = 0;
  uint64_t ring_bytes = 0;
  uint64_t expert_pool_bytes = 0;
  uint64_t total_bytes() const {
    return state_bytes + scratch_bytes + staging_bytes + pinned_bytes + held_bytes + ring_bytes +
           expert_pool_bytes;
  }

  // Per decoded token, at steady state.
  uint64_t predicted_trunk_bytes_per_token = 0;
  uint64_t predicted_expert_bytes_per_token = 0;
  uint64_t predicted_bytes_per_token() const {
    return predicted_trunk_bytes_per_token + predicted_expert_bytes_per_token;
  }
  double predicted_expert_hit_rate = 0;  // mean over MoE layers
  bool routing_profile_used = false;
  double bandwidth_gbps = 0;
  double predicted_seconds_per_token = 0;  // the I/O floor: bytes / bandwidth
  // Lossless packs: bytes decoded per token (streamed and held units) and their time at
  // decode_gbps on one thread (overlapped with reads and compute as far as cores allow).
  uint64_t predicted_decode_bytes_per_token = 0;
  double decode_gbps = 0;
  double predicted_decode_seconds_per_token = 0;

  nlohmann::json to_json() const;
  std::string to_text() const;
};

// Bytes of sequence state (KDA S + conv history, MLA cache at max_context, last logits).
uint64_t sequence_state_bytes(const ModelConfig& c, int max_context);

// Plans `budget_bytes` (0 = everything resident). ResourceExhausted naming the minimum when
// the budget is below it.
Result<ResidencyPlan> plan_residency(const ModelLayout& layout, uint64_t budget_bytes,
                                     const PlanOptions& options);

}  // namespace nj
