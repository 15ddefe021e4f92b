// Where every weight byte lives: the residency planner's output (engine/plan/planner.h
// explains the choices) and what the weight sources are built from. Pinned and held trunk
// units, the ring for streamed ones, expert buffers and cache slots, the memory each part
// takes, and the reads and seconds per step the plan predicts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nj {

struct ResidencyPlan {
  uint64_t budget_bytes = 0;
  uint64_t min_memory_bytes = 0;  // the smallest budget this model runs in with these options
  bool everything_resident = false;

  // Trunk units: 0..layers-1 are the layers, `layers` is the head.
  std::vector<bool> pinned;      // [layers + 1]: decoded bytes kept in memory
  std::vector<bool> held;        // [layers + 1]: stored (lossless) bytes kept, decoded on use
  int ring_slots = 0;            // buffers for streamed trunk units (0 when all are pinned)
  uint64_t ring_slot_bytes = 0;  // the largest streamed unit (of the head: one part)
  int head_parts = 1;            // a streamed head is read in this many parts (layout.h)

  int expert_buffers = 0;  // staging + cache: buffers of one expert each
  uint64_t expert_buffer_bytes = 0;
  std::vector<int> expert_cache_slots;  // [layers]: idle experts a layer may keep (0 for dense)

  int batch = 1;               // sequences per decode pass
  int rows_per_pass = 1;       // the most rows a pass carries (activations are sized for it)
  int draft_tokens = 0;        // drafts per sequence per pass the budget holds (<= asked for)
  int max_batch = 0;           // the largest batch this budget holds (0: not even one)
  uint64_t state_bytes = 0;    // batch x sequence_states x the sequence state at max_context
  uint64_t scratch_bytes = 0;  // the activations of a pass (activations.h), kernels' scratch
  uint64_t staging_bytes = 0;  // lossless: one run of stored blocks per I/O thread (0 otherwise)
  uint64_t pinned_bytes = 0;
  uint64_t held_bytes = 0;
  uint64_t ring_bytes = 0;
  uint64_t expert_pool_bytes = 0;
  uint64_t total_bytes() const {
    return state_bytes + scratch_bytes + staging_bytes + pinned_bytes + held_bytes + ring_bytes +
           expert_pool_bytes;
  }

  // Per decode step of the whole batch (one token for each of `batch` sequences), at
  // steady state: every streamed trunk unit once, and the experts the step's rows need
  // (under uniform routing, a layer's batch of B rows needs E·(1 − (1 − k/E)^B) distinct
  // experts), less what the cache holds.
  uint64_t predicted_trunk_bytes_per_step = 0;
  uint64_t predicted_expert_bytes_per_step = 0;
  uint64_t predicted_bytes_per_step() const {
    return predicted_trunk_bytes_per_step + predicted_expert_bytes_per_step;
  }
  double predicted_distinct_experts = 0;  // per MoE layer per decode step
  // Per decoded token: a step's bytes shared by the batch's sequences.
  uint64_t predicted_trunk_bytes_per_token = 0;
  uint64_t predicted_expert_bytes_per_token = 0;
  uint64_t predicted_bytes_per_token() const {
    return predicted_trunk_bytes_per_token + predicted_expert_bytes_per_token;
  }
  double predicted_expert_hit_rate = 0;  // mean over MoE layers
  bool routing_profile_used = false;
  double bandwidth_gbps = 0;
  double predicted_seconds_per_step = 0;   // the I/O floor: a step's bytes / bandwidth
  double predicted_seconds_per_token = 0;  // per sequence's token: the step's floor / batch
  double predicted_tokens_per_second = 0;  // all sequences together
  // Lossless packs: bytes decoded per step (streamed and held units) and their time at
  // decode_gbps on one thread (overlapped with reads and compute as far as cores allow).
  uint64_t predicted_decode_bytes_per_step = 0;
  double decode_gbps = 0;
  double predicted_decode_seconds_per_step = 0;

  nlohmann::json to_json() const;
  std::string to_text() const;
};

}  // namespace nj
