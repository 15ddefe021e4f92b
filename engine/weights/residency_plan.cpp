// ResidencyPlan's printed forms (`nightjar plan`, its --output json).
#include "engine/weights/residency_plan.h"

#include <sstream>

#include "engine/util/units.h"

namespace nj {

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
  j["head_parts"] = head_parts;
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
  j["batch"] = batch;
  j["rows_per_pass"] = rows_per_pass;
  j["max_batch"] = max_batch;
  j["predicted_bytes_per_step"] = predicted_bytes_per_step();
  j["predicted_trunk_bytes_per_step"] = predicted_trunk_bytes_per_step;
  j["predicted_expert_bytes_per_step"] = predicted_expert_bytes_per_step;
  j["predicted_distinct_experts"] = predicted_distinct_experts;
  j["predicted_bytes_per_token"] = predicted_bytes_per_token();
  j["predicted_trunk_bytes_per_token"] = predicted_trunk_bytes_per_token;
  j["predicted_expert_bytes_per_token"] = predicted_expert_bytes_per_token;
  j["predicted_expert_hit_rate"] = predicted_expert_hit_rate;
  j["hit_rate_model"] = routing_profile_used ? "routing profile" : "uniform routing";
  j["bandwidth_gbps"] = bandwidth_gbps;
  j["predicted_seconds_per_step"] = predicted_seconds_per_step;
  j["predicted_seconds_per_token"] = predicted_seconds_per_token;
  j["predicted_tokens_per_second"] = predicted_tokens_per_second;
  j["predicted_decode_bytes_per_step"] = predicted_decode_bytes_per_step;
  j["decode_gbps"] = decode_gbps;
  j["predicted_decode_seconds_per_step"] = predicted_decode_seconds_per_step;
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
      << " (" << format_bytes(held_bytes) << ", decoded on each use)\n";
  o << "trunk ring          " << ring_slots << " x " << format_bytes(ring_slot_bytes);
  if (head_parts > 1) o << " (the head read in " << head_parts << " parts)";
  o << "\n";
  if (staging_bytes) o << "block staging       " << format_bytes(staging_bytes) << "\n";
  const int cached = std::accumulate(expert_cache_slots.begin(), expert_cache_slots.end(), 0);
  o << "expert buffers      " << expert_buffers << " x " << format_bytes(expert_buffer_bytes)
    << " (" << cached << " cache slots over the MoE layers)\n";
  o << "batch               " << batch << " sequence" << (batch == 1 ? "" : "s")
    << " per step, passes of up to " << rows_per_pass << " rows";
  if (budget_bytes) o << " (this budget holds up to " << max_batch << ")";
  o << "\n";
  o << "state + activations " << format_bytes(state_bytes) << " + " << format_bytes(scratch_bytes)
    << "\n";
  o << "planned total       " << format_bytes(total_bytes()) << "\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * predicted_expert_hit_rate);
  std::snprintf(buf + 64, 64, "%.1f", predicted_distinct_experts);
  o << "reads per step      " << format_bytes(predicted_bytes_per_step()) << " (trunk "
    << format_bytes(predicted_trunk_bytes_per_step) << ", experts "
    << format_bytes(predicted_expert_bytes_per_step) << ": " << (buf + 64)
    << " distinct per layer at a " << buf << " cache hit rate, "
    << (routing_profile_used ? "from the routing profile" : "assuming uniform routing") << ")\n";
  o << "reads per token     " << format_bytes(predicted_bytes_per_token()) << "\n";
  std::snprintf(buf, sizeof buf,
                "%.3f s per step at %.2f GB/s, %.3f s per token, %.3f tokens/s in all",
                predicted_seconds_per_step, bandwidth_gbps, predicted_seconds_per_token,
                predicted_tokens_per_second);
  o << "I/O floor           " << buf << "\n";
  if (predicted_decode_bytes_per_step) {
    std::snprintf(buf, sizeof buf, "%.3f s at %.1f GB/s", predicted_decode_seconds_per_step,
                  decode_gbps);
    o << "decode per step     " << format_bytes(predicted_decode_bytes_per_step) << ", " << buf
      << " on one I/O thread\n";
  }
  return o.str();
}

}  // namespace nj
