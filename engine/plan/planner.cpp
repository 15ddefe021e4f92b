// Residency planning (the order of preference is explained in planner.h).
#include "engine/plan/planner.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <sstream>

#include <cmath>

#include "engine/forward/activations.h"
#include "engine/weights/stored_unit.h"
#include "engine/util/units.h"

namespace nj {
namespace {

std::atomic<uint64_t> g_plan_calls{0};  // plan_residency_calls()

uint64_t read_bytes(const UnitLayout& u) {
  uint64_t n = 0;
  for (const Extent& e : u.extents) n += e.length;
  return n;
}

struct Unit {
  int id;
  uint64_t buffer_bytes;   // memory to hold it
  uint64_t read_bytes;     // bytes read to stream it
  uint64_t decoded_bytes;  // lossless units: bytes decoded per use (0 otherwise)
  uint64_t ring_bytes;     // a ring slot for it when streamed (the head: one of its parts)
};

uint64_t decoded_bytes(const UnitLayout& u) {
  uint64_t n = 0;
  for (const StoredBlock& b : u.blocks) n += b.raw_bytes;
  return n;
}

// One staging buffer per I/O thread holds the longest read of stored blocks (a run of them,
// stored_unit.h; 0 without blocks), in staging_buffer_bytes (read_pool.h). StreamingSource sizes
// its pool's buffers the same way.
uint64_t staging_bytes(const ModelLayout& layout, int io_threads) {
  uint64_t largest = largest_block_run(layout.head().unit);
  for (int l = 0; l < layout.config().layers; ++l)
    largest = std::max(largest, largest_block_run(layout.layer(l).unit));
  return static_cast<uint64_t>(std::max(1, io_threads)) * staging_buffer_bytes(largest);
}

uint64_t largest_layer_buffer(const ModelLayout& layout) {
  uint64_t largest = 0;
  for (int l = 0; l < layout.config().layers; ++l)
    largest = std::max(largest, layout.layer(l).unit.buffer_bytes);
  return largest;
}

}  // namespace

int streamed_head_parts(const ModelLayout& layout) {
  const HeadLayout& h = layout.head();
  const uint64_t layer = largest_layer_buffer(layout);
  if (!h.unit.blocks.empty() || h.unit.verify || h.unit.buffer_bytes <= layer) return 1;
  const int most = std::min(h.lm_head.rows, kMaxHeadParts);
  int n = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(most),
                                              (h.unit.buffer_bytes + layer - 1) / std::max<uint64_t>(layer, 1)));
  while (n < most && head_part_buffer_bound(h, n) > layer) ++n;
  return std::max(1, n);
}

uint64_t streamed_head_slot_bytes(const ModelLayout& layout) {
  const int n = streamed_head_parts(layout);
  return n == 1 ? layout.head().unit.buffer_bytes : head_part_buffer_bound(layout.head(), n);
}

uint64_t sequence_state_bytes(const ModelConfig& c, int max_context) {
  const uint64_t P = static_cast<uint64_t>(c.kda_width()),
                 D = static_cast<uint64_t>(c.kda_head_dim);
  const uint64_t kda =
      static_cast<uint64_t>(c.kda_heads) * D * D + static_cast<uint64_t>(c.conv_kernel - 1) * 3 * P;
  const uint64_t mla =
      static_cast<uint64_t>(max_context) * static_cast<uint64_t>(c.kv_lora_rank + c.qk_rope);
  return 4 * (static_cast<uint64_t>(c.num_kda_layers()) * kda +
              static_cast<uint64_t>(c.num_mla_layers()) * mla + static_cast<uint64_t>(c.vocab)) +
         4 * static_cast<uint64_t>(max_context);  // token ids
}

ActivationShape planned_activation_shape(const PlanOptions& o) {
  const int batch = std::max(1, o.batch);
  const int chunk = std::max(1, o.prefill_chunk);
  const int per_sequence = 1 + std::max(0, o.draft_tokens);  // a decode pass's rows per sequence
  // Windows: every sequence may bring a whole prefill chunk to a pass.
  const int rows =
      o.windows ? batch * std::max(chunk, per_sequence) : std::max(chunk, batch * per_sequence);
  ActivationShape s{rows, batch, std::max(1, o.max_context),
                    o.all_logits ? rows : batch * per_sequence};
  if (o.draft_tokens > 0) {
    s.tentative_sequences = batch;
    s.tentative_rows = per_sequence;
    s.kda_rollback = o.kda_rollback;
  }
  return s;
}

double expected_distinct_experts(int num_experts, int top_k, int rows) {
  if (num_experts <= 0 || rows <= 0) return 0;
  const double miss = 1.0 - static_cast<double>(top_k) / num_experts;
  return num_experts * (1.0 - std::pow(miss, rows));
}

double expected_distinct_experts(const ModelConfig& c, const RoutingProfile* routing, int layer,
                                 int rows) {
  const double measured = routing != nullptr ? routing->expected_distinct(layer, rows) : -1.0;
  return measured >= 0 ? measured : expected_distinct_experts(c.num_experts, c.top_k, rows);
}

namespace {

// State and activations of a batch: what the budget holds besides weights.
void batch_memory(const ModelConfig& c, const PlanOptions& o, int batch, uint64_t* state,
                  uint64_t* scratch) {
  PlanOptions ob = o;
  ob.batch = batch;
  *state = sequence_state_bytes(c, o.max_context) *
           static_cast<uint64_t>(std::max(0, o.sequence_states)) * static_cast<uint64_t>(batch);
  *scratch = (o.passes ? activation_bytes(c, planned_activation_shape(ob)) : 0) + o.sweep_bytes;
}

struct WeightMinimum {
  uint64_t largest_unit = 0, expert_buffer = 0;
  uint64_t staging = 0;  // lossless packs: a run of stored blocks per I/O thread
  int ring_slots = 2, expert_buffers = 0;
  uint64_t bytes() const {
    return staging + static_cast<uint64_t>(ring_slots) * largest_unit +
           static_cast<uint64_t>(expert_buffers) * expert_buffer;
  }
};

WeightMinimum weight_minimum(const ModelLayout& layout, const PlanOptions& o) {
  const ModelConfig& c = layout.config();
  WeightMinimum m;
  m.largest_unit = streamed_head_slot_bytes(layout);
  bool any_moe = false;
  for (int l = 0; l < c.layers; ++l) {
    m.largest_unit = std::max(m.largest_unit, layout.layer(l).unit.buffer_bytes);
    if (c.is_dense(l)) continue;
    any_moe = true;
    for (int e = 0; e < c.num_experts; ++e)
      m.expert_buffer = std::max(m.expert_buffer, layout.expert(l, e).unit.buffer_bytes);
  }
  m.staging = staging_bytes(layout, o.io_threads);
  m.ring_slots = std::max(1, o.ring_slots);
  m.expert_buffers = any_moe ? std::max(2, std::min(c.top_k, o.min_expert_buffers)) : 0;
  return m;
}

}  // namespace

int max_batch_for_budget(const ModelLayout& layout, const PlanOptions& o, uint64_t budget) {
  if (min_memory_for_batch(layout, o, 1) > budget) return 0;
  int lo = 1, hi = 2;
  while (hi < (1 << 20) && min_memory_for_batch(layout, o, hi) <= budget) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (min_memory_for_batch(layout, o, mid) <= budget ? lo : hi) = mid;
  }
  return lo;
}


uint64_t min_memory_for_batch(const ModelLayout& layout, const PlanOptions& o, int batch) {
  PlanOptions plain = o;
  plain.draft_tokens = 0;  // drafts are never part of the minimum
  uint64_t state = 0, scratch = 0;
  batch_memory(layout.config(), plain, batch, &state, &scratch);
  return state + scratch + weight_minimum(layout, o).bytes();
}

uint64_t resident_memory_for_batch(const ModelLayout& layout, const PlanOptions& o, int batch) {
  const ModelConfig& c = layout.config();
  uint64_t state = 0, scratch = 0;
  batch_memory(c, o, batch, &state, &scratch);  // drafts included: a resident plan holds them all
  uint64_t weights = layout.head().unit.buffer_bytes;
  for (int l = 0; l < c.layers; ++l) weights += layout.layer(l).unit.buffer_bytes;
  const WeightMinimum wmin = weight_minimum(layout, o);
  for (int l = 0; l < c.layers; ++l)
    if (!c.is_dense(l)) weights += static_cast<uint64_t>(c.num_experts) * wmin.expert_buffer;
  return state + scratch + weights;
}

int max_resident_batch(const ModelLayout& layout, const PlanOptions& o, uint64_t free_bytes) {
  if (resident_memory_for_batch(layout, o, 1) > free_bytes) return 0;
  int lo = 1, hi = 2;
  while (hi < (1 << 20) && resident_memory_for_batch(layout, o, hi) <= free_bytes) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (resident_memory_for_batch(layout, o, mid) <= free_bytes ? lo : hi) = mid;
  }
  return lo;
}

uint64_t plan_residency_calls() {
  return g_plan_calls.load(std::memory_order_relaxed);
}

Result<ResidencyPlan> plan_residency(const ModelLayout& layout, uint64_t budget,
                                     const PlanOptions& o) {
  g_plan_calls.fetch_add(1, std::memory_order_relaxed);
  const ModelConfig& c = layout.config();
  ResidencyPlan p;
  p.budget_bytes = budget;
  p.bandwidth_gbps = o.bandwidth_gbps;
  p.decode_gbps = o.decode_gbps;
  p.batch = std::max(1, o.batch);
  // Steps 1-3 plan plain decoding: drafts get only what they leave over (see planner.h).
  PlanOptions plain = o;
  plain.draft_tokens = 0;
  p.rows_per_pass = planned_activation_shape(plain).rows;
  batch_memory(c, plain, p.batch, &p.state_bytes, &p.scratch_bytes);
  uint64_t fixed = p.state_bytes + p.scratch_bytes;
  // Settles the drafts per sequence on `d`: their rows' activations and rollback log.
  auto plan_drafts = [&](int d) {
    PlanOptions od = o;
    od.draft_tokens = d;
    uint64_t state = 0;
    batch_memory(c, od, p.batch, &state, &p.scratch_bytes);
    p.rows_per_pass = planned_activation_shape(od).rows;
    p.draft_tokens = d;
    fixed = p.state_bytes + p.scratch_bytes;
  };
  // The extra memory `d` drafts per sequence need over plain decoding.
  auto draft_bytes = [&](int d) {
    PlanOptions od = o;
    od.draft_tokens = d;
    uint64_t state = 0, scratch = 0;
    batch_memory(c, od, p.batch, &state, &scratch);
    return scratch - p.scratch_bytes;
  };

  std::vector<Unit> units;
  for (int l = 0; l <= c.layers; ++l) {
    const UnitLayout& u = l == c.layers ? layout.head().unit : layout.layer(l).unit;
    units.push_back({l, u.buffer_bytes, read_bytes(u), decoded_bytes(u),
                     l == c.layers ? streamed_head_slot_bytes(layout) : u.buffer_bytes});
  }
  const bool lossless =
      std::any_of(units.begin(), units.end(), [](const Unit& u) { return u.decoded_bytes > 0; });
  std::vector<int> moe_layers;
  uint64_t expert_read = 0;
  for (int l = 0; l < c.layers; ++l) {
    if (c.is_dense(l)) continue;
    moe_layers.push_back(l);
    for (int e = 0; e < c.num_experts; ++e)
      expert_read = std::max(expert_read, read_bytes(layout.expert(l, e).unit));
  }
  const WeightMinimum wmin = weight_minimum(layout, o);
  const uint64_t expert_buffer = wmin.expert_buffer, largest_unit = wmin.largest_unit;
  const int ring_slots = wmin.ring_slots, min_expert_buffers = wmin.expert_buffers;
  p.expert_buffer_bytes = expert_buffer;
  p.min_memory_bytes = fixed + wmin.bytes();
  p.staging_bytes = budget ? wmin.staging : 0;  // staging is only used when streaming
  p.max_batch = budget == 0 ? 0 : max_batch_for_budget(layout, o, budget);

  p.pinned.assign(units.size(), false);
  p.held.assign(units.size(), false);
  p.expert_cache_slots.assign(static_cast<size_t>(c.layers), 0);
  auto ring_for = [&](const std::vector<bool>& pinned) {
    uint64_t m = 0;
    for (const Unit& u : units)
      if (!pinned[static_cast<size_t>(u.id)]) m = std::max(m, u.ring_bytes);
    return m;
  };
  auto pinned_sum = [&](const std::vector<bool>& pinned) {
    uint64_t s = 0;
    for (const Unit& u : units)
      if (pinned[static_cast<size_t>(u.id)]) s += u.buffer_bytes;
    return s;
  };
  auto held_sum = [&](const std::vector<bool>& held) {
    uint64_t s = 0;
    for (const Unit& u : units)
      if (held[static_cast<size_t>(u.id)]) s += u.read_bytes;
    return s;
  };

  if (budget == 0) {  // no budget: everything resident
    p.everything_resident = true;
    plan_drafts(std::max(0, o.draft_tokens));
    p.pinned.assign(units.size(), true);
    p.expert_buffers = static_cast<int>(moe_layers.size()) * c.num_experts;
    for (int l : moe_layers) p.expert_cache_slots[static_cast<size_t>(l)] = c.num_experts;
  } else {
    if (budget < p.min_memory_bytes) {
      std::string fits;
      if (p.batch > 1)
        fits = p.max_batch > 0 ? "; a batch of " + std::to_string(p.max_batch) + " fits this budget"
                               : "; not even a batch of 1 fits this budget";
      return resource_exhausted(
          "memory budget " + format_bytes(budget) + " is below the minimum of " +
          format_bytes(p.min_memory_bytes) + " (" + std::to_string(p.min_memory_bytes) +
          " bytes) this model needs" +
          (p.batch > 1 ? " for a batch of " + std::to_string(p.batch) : "") + ": sequence state " +
          format_bytes(p.state_bytes) + ", activations " + format_bytes(p.scratch_bytes) +
          (wmin.staging ? ", block staging " + format_bytes(wmin.staging) : std::string()) + ", " +
          std::to_string(ring_slots) + " x the largest trunk unit " + format_bytes(largest_unit) +
          ", " + std::to_string(min_expert_buffers) + " x one expert " +
          format_bytes(expert_buffer) + fits +
          (wmin.staging ? "; the block staging is the lossless pack's: a raw pack (`nightjar pack "
                          "--codec raw`) or the shards (--no-pack) need none"
                        : std::string()));
    }
    int buffers = min_expert_buffers;
    const int step_experts = std::min(c.num_experts, p.batch * c.top_k);
    auto total = [&](const std::vector<bool>& pinned, int slots, int nbuf) {
      return fixed + p.staging_bytes + pinned_sum(pinned) + held_sum(p.held) +
             static_cast<uint64_t>(slots) * ring_for(pinned) +
             static_cast<uint64_t>(nbuf) * expert_buffer;
    };
    // 2. up to the experts one decode step needs, so that a layer's misses are read at once
    while (!moe_layers.empty() && buffers < step_experts &&
           total(p.pinned, ring_slots, buffers + 1) <= budget)
      ++buffers;
    // 3. trunk units kept in memory, pinned or held (trunk_residency.h)
    std::vector<TrunkUnitCost> costs;
    for (const Unit& u : units)
      costs.push_back(
          {u.buffer_bytes, u.read_bytes, u.decoded_bytes ? u.read_bytes : 0, u.decoded_bytes});
    const TrunkCostModel model{o.bandwidth_gbps, o.decode_gbps,
                               lossless ? o.pin_compressed : PinCompressed::kNever};
    auto split = [&](const std::vector<UnitResidency>& r, std::vector<bool>* pinned,
                     std::vector<bool>* held) {
      for (size_t i = 0; i < r.size(); ++i) {
        (*pinned)[i] = r[i] == UnitResidency::kPinned;
        (*held)[i] = r[i] == UnitResidency::kHeld;
      }
    };
    const std::vector<UnitResidency> residency =
        choose_trunk_residency(costs, model, budget, [&](const std::vector<UnitResidency>& r) {
          std::vector<bool> pinned(r.size()), held(r.size());
          split(r, &pinned, &held);
          return fixed + p.staging_bytes + pinned_sum(pinned) + held_sum(held) +
                 static_cast<uint64_t>(ring_slots) * ring_for(pinned) +
                 static_cast<uint64_t>(buffers) * expert_buffer;
        });
    split(residency, &p.pinned, &p.held);
    // 4. drafts: as many per sequence as the memory left over holds, up to the most asked for
    {
      const uint64_t left = budget - total(p.pinned, ring_slots, buffers);
      int d = std::max(0, o.draft_tokens);
      while (d > 0 && draft_bytes(d) > left) --d;
      plan_drafts(d);
    }
    // 5. expert-cache slots, evenly over the MoE layers
    if (!moe_layers.empty()) {
      const uint64_t left = budget - total(p.pinned, ring_slots, buffers);
      uint64_t extra = expert_buffer ? left / expert_buffer : 0;
      extra = std::min<uint64_t>(
          extra, static_cast<uint64_t>(moe_layers.size()) * static_cast<uint64_t>(c.num_experts));
      const uint64_t each = extra / moe_layers.size(), rest = extra % moe_layers.size();
      for (size_t i = 0; i < moe_layers.size(); ++i) {
        const int slots = static_cast<int>(each + (i < rest ? 1 : 0));
        p.expert_cache_slots[static_cast<size_t>(moe_layers[i])] = slots;
        buffers += slots;
      }
    }
    p.expert_buffers = buffers;
    const uint64_t ring = ring_for(p.pinned);
    p.ring_slots = ring ? ring_slots : 0;
    p.ring_slot_bytes = ring;
    if (!p.pinned.back()) p.head_parts = streamed_head_parts(layout);
  }
  p.pinned_bytes = pinned_sum(p.pinned);
  p.held_bytes = held_sum(p.held);
  p.ring_bytes = static_cast<uint64_t>(p.ring_slots) * p.ring_slot_bytes;
  p.expert_pool_bytes = static_cast<uint64_t>(p.expert_buffers) * expert_buffer;
  p.everything_resident =
      p.everything_resident ||
      (std::all_of(p.pinned.begin(), p.pinned.end(), [](bool b) { return b; }) &&
       std::all_of(moe_layers.begin(), moe_layers.end(), [&](int l) {
         return p.expert_cache_slots[static_cast<size_t>(l)] >= c.num_experts;
       }));

  // Predicted reads per decode step at steady state (uniform routing for the cache and the
  // union of the batch's experts unless a routing profile says otherwise).
  for (const Unit& u : units) {
    if (p.pinned[static_cast<size_t>(u.id)]) continue;
    if (!p.held[static_cast<size_t>(u.id)]) p.predicted_trunk_bytes_per_step += u.read_bytes;
    p.predicted_decode_bytes_per_step += u.decoded_bytes;
  }
  p.predicted_trunk_bytes_per_step += static_cast<uint64_t>(p.batch) * layout.embedding_row_bytes();
  double hit_sum = 0, distinct_sum = 0;
  for (int l : moe_layers) {
    const double distinct = expected_distinct_experts(c, o.routing, l, p.batch);
    distinct_sum += distinct;
    if (o.routing && o.routing->expected_distinct(l, 1) >= 0) p.routing_profile_used = true;
    const int slots = p.expert_cache_slots[static_cast<size_t>(l)];
    double hit = std::min(1.0, static_cast<double>(slots) / c.num_experts);
    if (slots >= c.num_experts) {
      hit = 1.0;  // every expert stays once read
    } else if (o.routing) {
      const double measured = o.routing->hit_rate(l, slots);
      if (measured >= 0) {
        hit = measured;
        p.routing_profile_used = true;
      }
    }
    hit_sum += hit;
    p.predicted_expert_bytes_per_step += static_cast<uint64_t>(
        distinct * static_cast<double>(expert_read) * (1.0 - hit));
  }
  p.predicted_distinct_experts =
      moe_layers.empty() ? 0 : distinct_sum / static_cast<double>(moe_layers.size());
  p.predicted_expert_hit_rate =
      moe_layers.empty() ? 0 : hit_sum / static_cast<double>(moe_layers.size());
  p.predicted_trunk_bytes_per_token =
      p.predicted_trunk_bytes_per_step / static_cast<uint64_t>(p.batch);
  p.predicted_expert_bytes_per_token =
      p.predicted_expert_bytes_per_step / static_cast<uint64_t>(p.batch);
  p.predicted_seconds_per_step =
      static_cast<double>(p.predicted_bytes_per_step()) / (o.bandwidth_gbps * 1e9);
  p.predicted_seconds_per_token = p.predicted_seconds_per_step / p.batch;
  p.predicted_tokens_per_second =
      p.predicted_seconds_per_step > 0 ? p.batch / p.predicted_seconds_per_step : 0.0;
  p.predicted_decode_seconds_per_step =
      static_cast<double>(p.predicted_decode_bytes_per_step) / (o.decode_gbps * 1e9);
  return p;
}

}  // namespace nj
