// Planner step 3: streamed, held or pinned trunk units (the model is in trunk_residency.h).
#include "engine/plan/trunk_residency.h"

#include <algorithm>
#include <numeric>

namespace nj {

const char* pin_compressed_name(PinCompressed p) {
  switch (p) {
    case PinCompressed::kAuto:
      return "auto";
    case PinCompressed::kNever:
      return "no";
    case PinCompressed::kAlways:
      return "yes";
  }
  return "auto";
}

double unit_seconds_per_token(const TrunkUnitCost& u, UnitResidency r, const TrunkCostModel& m) {
  const double decode = static_cast<double>(u.decoded_bytes) / (m.decode_gbps * 1e9);
  switch (r) {
    case UnitResidency::kStreamed:
      return static_cast<double>(u.read_bytes) / (m.bandwidth_gbps * 1e9) + decode;
    case UnitResidency::kHeld:
      return decode;
    case UnitResidency::kPinned:
      return 0;
  }
  return 0;
}

namespace {

// Units largest first (pinning the largest also shrinks the ring); ties keep unit order.
std::vector<size_t> largest_first(const std::vector<TrunkUnitCost>& units) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return units[a].buffer_bytes > units[b].buffer_bytes;
  });
  return order;
}

}  // namespace

std::vector<UnitResidency> choose_trunk_residency(
    const std::vector<TrunkUnitCost>& units, const TrunkCostModel& model, uint64_t budget,
    const std::function<uint64_t(const std::vector<UnitResidency>&)>& total_bytes) {
  std::vector<UnitResidency> r(units.size(), UnitResidency::kStreamed);
  auto try_set = [&](size_t u, UnitResidency to) {
    std::vector<UnitResidency> trial = r;
    trial[u] = to;
    if (total_bytes(trial) > budget) return false;
    r = std::move(trial);
    return true;
  };
  const std::vector<size_t> order = largest_first(units);
  if (model.policy == PinCompressed::kNever) {
    for (size_t u : order) try_set(u, UnitResidency::kPinned);
    return r;
  }
  if (model.policy == PinCompressed::kAlways) {
    for (size_t u : order)
      if (!units[u].held_bytes || !try_set(u, UnitResidency::kHeld))
        try_set(u, UnitResidency::kPinned);
    return r;
  }
  // Greedy: the move saving the most seconds per byte of memory it adds (moves that add
  // none and save something first), until no move fits.
  while (true) {
    const uint64_t now = total_bytes(r);
    double best_gain = 0;
    size_t best_u = units.size();
    UnitResidency best_to = UnitResidency::kStreamed;
    for (size_t u : order) {
      for (UnitResidency to : {UnitResidency::kHeld, UnitResidency::kPinned}) {
        if (static_cast<int>(to) <= static_cast<int>(r[u])) continue;
        if (to == UnitResidency::kHeld && !units[u].held_bytes) continue;
        const double saved = unit_seconds_per_token(units[u], r[u], model) -
                             unit_seconds_per_token(units[u], to, model);
        if (saved <= 0) continue;
        std::vector<UnitResidency> trial = r;
        trial[u] = to;
        const uint64_t after = total_bytes(trial);
        if (after > budget) continue;
        const double gain = after <= now ? 1e30 * saved : saved / static_cast<double>(after - now);
        if (gain > best_gain) {
          best_gain = gain;
          best_u = u;
          best_to = to;
        }
      }
    }
    if (best_u == units.size()) return r;
    r[best_u] = best_to;
  }
}

}  // namespace nj
