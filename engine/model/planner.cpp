// Residency planning (the order of preference is explained in planner.h).
#include "engine/model/planner.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "engine/model/session.h"
#include "engine/util/units.h"

namespace nj {
namespace {

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
};

uint64_t decoded_bytes(const UnitLayout& u) {
  uint64_t n = 0;
  for (const StoredBlock& b : u.blocks) n += b.raw_bytes;
  return n;
}

// One staging buffer per I/O thread holds the largest stored block (0 without blocks).
uint64_t staging_bytes(const ModelLayout& layout, int io_threads) {
  uint64_t largest = 0;
  auto scan = [&](const UnitLayout& u) {
    for (const StoredBlock& b : u.blocks) largest = std::max<uint64_t>(largest, b.stored_bytes);
  };
  for (int l = 0; l < layout.config().layers; ++l) scan(layout.layer(l).unit);
  scan(layout.head().unit);
  return static_cast<uint64_t>(std::max(1, io_threads)) * align_up(largest, kDirectAlign);
}

}  // namespace

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

Result<ResidencyPlan> plan_residency(const ModelLayout& layout, uint64_t budget,
                                     const PlanOptions& o) {
  const ModelConfig& c = layout.config();
  ResidencyPlan p;
  p.budget_bytes = budget;
  p.bandwidth_gbps = o.bandwidth_gbps;
  p.state_bytes = sequence_state_bytes(c, o.max_context) *
                  static_cast<uint64_t>(std::max(1, o.sequence_states));
  p.scratch_bytes = estimate_session_scratch_bytes(c, o.prefill_chunk, o.max_context, o.all_logits);
  p.decode_gbps = o.decode_gbps;
  const uint64_t fixed = p.state_bytes + p.scratch_bytes;

  std::vector<Unit> units;
  for (int l = 0; l <= c.layers; ++l) {
    const UnitLayout& u = l == c.layers ? layout.head().unit : layout.layer(l).unit;
    units.push_back({l, u.buffer_bytes, read_bytes(u), decoded_bytes(u)});
  }
  const bool lossless =
      std::any_of(units.begin(), units.end(), [](const Unit& u) { return u.decoded_bytes > 0; });
  std::vector<int> moe_layers;
  uint64_t expert_buffer = 0, expert_read = 0;
  for (int l = 0; l < c.layers; ++l) {
    if (c.is_dense(l)) continue;
    moe_layers.push_back(l);
    for (int e = 0; e < c.num_experts; ++e) {
      expert_buffer = std::max(expert_buffer, layout.expert(l, e).unit.buffer_bytes);
      expert_read = std::max(expert_read, read_bytes(layout.expert(l, e).unit));
    }
  }
  p.expert_buffer_bytes = expert_buffer;
  const uint64_t largest_unit =
      std::max_element(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
        return a.buffer_bytes < b.buffer_bytes;
      })->buffer_bytes;
  const int ring_slots = std::max(2, o.ring_slots);
  const int min_expert_buffers =
      moe_layers.empty() ? 0 : std::max(2, std::min(c.top_k, o.min_expert_buffers));
  const uint64_t staging = lossless ? staging_bytes(layout, o.io_threads) : 0;  // when streaming
  p.staging_bytes = budget ? staging : 0;
  p.min_memory_bytes = fixed + staging + static_cast<uint64_t>(ring_slots) * largest_unit +
                       static_cast<uint64_t>(min_expert_buffers) * expert_buffer;

  p.pinned.assign(units.size(), false);
  p.held.assign(units.size(), false);
  p.expert_cache_slots.assign(static_cast<size_t>(c.layers), 0);
  auto ring_for = [&](const std::vector<bool>& pinned) {
    uint64_t m = 0;
    for (const Unit& u : units)
      if (!pinned[static_cast<size_t>(u.id)]) m = std::max(m, u.buffer_bytes);
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
    p.pinned.assign(units.size(), true);
    p.expert_buffers = static_cast<int>(moe_layers.size()) * c.num_experts;
    for (int l : moe_layers) p.expert_cache_slots[static_cast<size_t>(l)] = c.num_experts;
  } else {
    if (budget < p.min_memory_bytes)
      return resource_exhausted(
          "memory budget " + format_bytes(budget) + " is below the minimum of " +
          format_bytes(p.min_memory_bytes) + " (" + std::to_string(p.min_memory_bytes) +
          " bytes) this model needs: sequence state " + format_bytes(p.state_bytes) + ", scratch " +
          format_bytes(p.scratch_bytes) +
          (p.staging_bytes ? ", staging " + format_bytes(p.staging_bytes) : std::string()) + ", " +
          std::to_string(ring_slots) + " x the largest trunk unit " + format_bytes(largest_unit) +
          ", " + std::to_string(min_expert_buffers) + " x one expert " +
          format_bytes(expert_buffer));
    int buffers = min_expert_buffers;
    auto total = [&](const std::vector<bool>& pinned, int slots, int nbuf) {
      return fixed + p.staging_bytes + pinned_sum(pinned) + held_sum(p.held) +
             static_cast<uint64_t>(slots) * ring_for(pinned) +
             static_cast<uint64_t>(nbuf) * expert_buffer;
    };
    // 2. up to top_k expert buffers, so that a layer's misses are read at once
    while (!moe_layers.empty() && buffers < c.top_k &&
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
    // 4. expert-cache slots, evenly over the MoE layers
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

  // Predicted reads per decoded token at steady state (uniform routing for the cache).
  for (const Unit& u : units) {
    if (p.pinned[static_cast<size_t>(u.id)]) continue;
    if (!p.held[static_cast<size_t>(u.id)]) p.predicted_trunk_bytes_per_token += u.read_bytes;
    p.predicted_decode_bytes_per_token += u.decoded_bytes;
  }
  p.predicted_trunk_bytes_per_token += layout.embedding_row_bytes();
  double hit_sum = 0;
  for (int l : moe_layers) {
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
    p.predicted_expert_bytes_per_token += static_cast<uint64_t>(
        static_cast<double>(c.top_k) * static_cast<double>(expert_read) * (1.0 - hit));
  }
  p.predicted_expert_hit_rate =
      moe_layers.empty() ? 0 : hit_sum / static_cast<double>(moe_layers.size());
  p.predicted_seconds_per_token =
      static_cast<double>(p.predicted_bytes_per_token()) / (o.bandwidth_gbps * 1e9);
  p.predicted_decode_seconds_per_token =
      static_cast<double>(p.predicted_decode_bytes_per_token) / (o.decode_gbps * 1e9);
  return p;
}

nlohmann::json ResidencyPlan::to_json() const {
  nlohmann::json j;
  j["budget_bytes"] = budget_bytes;
  j["min_memory_bytes"] = min_memory_bytes;
  j["everything_resident"] = everything_resident;
  std::vector<int> pinned_layers;
  for (size_t i = 0; i + 1 < pinned.size(); ++i)
    if (pinned[i]) pinned_layers.push_back(static_cast<int>(i));
  j["pinned_layers"] = pinned_layers;
  j["head_pinned"] = !pinned.empty() && pinned.back();
  std::vector<int> held_layers;
  for (size_t i = 0; i + 1 < held.size(); ++i)
    if (held[i]) held_layers.push_back(static_cast<int>(i));
  j["held_layers"] = held_layers;
  j["head_held"] = !held.empty() && held.back();
  j["ring_slots"] = ring_slots;
  j["ring_slot_bytes"] = ring_slot_bytes;
  j["expert_buffers"] = expert_buffers;
  j["expert_buffer_bytes"] = expert_buffer_bytes;
  j["expert_cache_slots"] = expert_cache_slots;
  j["memory"] = {{"state_bytes", state_bytes},
                 {"scratch_bytes", scratch_bytes},
                 {"staging_bytes", staging_bytes},
                 {"pinned_bytes", pinned_bytes},
                 {"held_bytes", held_bytes},
                 {"ring_bytes", ring_bytes},
                 {"expert_pool_bytes", expert_pool_bytes},
                 {"total_bytes", total_bytes()}};
  j["predicted_bytes_per_token"] = predicted_bytes_per_token();
  j["predicted_trunk_bytes_per_token"] = predicted_trunk_bytes_per_token;
  j["predicted_expert_bytes_per_token"] = predicted_expert_bytes_per_token;
  j["predicted_expert_hit_rate"] = predicted_expert_hit_rate;
  j["hit_rate_model"] = routing_profile_used ? "routing profile" : "uniform routing";
  j["bandwidth_gbps"] = bandwidth_gbps;
  j["predicted_seconds_per_token"] = predicted_seconds_per_token;
  j["predicted_decode_bytes_per_token"] = predicted_decode_bytes_per_token;
  j["decode_gbps"] = decode_gbps;
  j["predicted_decode_seconds_per_token"] = predicted_decode_seconds_per_token;
  return j;
}

std::string ResidencyPlan::to_text() const {
  std::ostringstream o;
  int npinned = 0;
  for (size_t i = 0; i + 1 < pinned.size(); ++i) npinned += pinned[i];
  o << "budget              "
    << (budget_bytes ? format_bytes(budget_bytes) : std::string("none (everything resident)"))
    << "\n";
  o << "minimum             " << format_bytes(min_memory_bytes) << " (" << min_memory_bytes
    << " bytes)\n";
  o << "pinned trunk        " << npinned << " of " << (pinned.empty() ? 0 : pinned.size() - 1)
    << " layers" << (!pinned.empty() && pinned.back() ? ", and the head" : "") << " ("
    << format_bytes(pinned_bytes) << ")\n";
  int nheld = 0;
  for (size_t i = 0; i + 1 < held.size(); ++i) nheld += held[i];
  if (held_bytes)
    o << "held compressed     " << nheld << " layers" << (held.back() ? ", and the head" : "")
      << " (" << format_bytes(held_bytes) << ", decoded on use)\n";
  o << "trunk ring          " << ring_slots << " x " << format_bytes(ring_slot_bytes) << "\n";
  if (staging_bytes) o << "block staging       " << format_bytes(staging_bytes) << "\n";
  const int cached = std::accumulate(expert_cache_slots.begin(), expert_cache_slots.end(), 0);
  o << "expert buffers      " << expert_buffers << " x " << format_bytes(expert_buffer_bytes)
    << " (" << cached << " cache slots over the MoE layers)\n";
  o << "state + scratch     " << format_bytes(state_bytes) << " + " << format_bytes(scratch_bytes)
    << "\n";
  o << "planned total       " << format_bytes(total_bytes()) << "\n";
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * predicted_expert_hit_rate);
  o << "reads per token     " << format_bytes(predicted_bytes_per_token()) << " (trunk "
    << format_bytes(predicted_trunk_bytes_per_token) << ", experts "
    << format_bytes(predicted_expert_bytes_per_token) << " at a " << buf << " cache hit rate, "
    << (routing_profile_used ? "from the routing profile" : "assuming uniform routing") << ")\n";
  std::snprintf(buf, sizeof buf, "%.3f s at %.2f GB/s", predicted_seconds_per_token,
                bandwidth_gbps);
  o << "I/O floor per token " << buf << "\n";
  if (predicted_decode_bytes_per_token) {
    std::snprintf(buf, sizeof buf, "%.3f s at %.1f GB/s", predicted_decode_seconds_per_token,
                  decode_gbps);
    o << "decode per token    " << format_bytes(predicted_decode_bytes_per_token) << ", " << buf
      << " on one I/O thread\n";
  }
  return o.str();
}

}  // namespace nj
