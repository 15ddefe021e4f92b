// Planner step 3 (planner.h): which trunk units stay in memory, and in what form.
//
// A unit of a lossless pack can stay in three ways: streamed (read from disk each token:
// its stored bytes, then decoded), held (its stored bytes kept in RAM and decoded into the
// ring on each use: no disk read, ~2/3 of the memory, a decode per token) or pinned (its
// decoded bytes kept: no read, no decode, all the memory). A unit of a raw pack, or of the
// shards, is streamed or pinned.
//
// Seconds per token a unit costs, as the planner predicts them:
//   streamed: read_bytes / bandwidth + decoded_bytes / decode rate
//   held:     decoded_bytes / decode rate
//   pinned:   0
// The decode term is counted in full although decoding runs on the I/O threads, overlapped
// with reads and compute; on a machine with cores to spare it is partly hidden. With
// PinCompressed::kAuto the planner moves units, one step at a time, by the most seconds
// saved per byte of memory (a fractional-knapsack greedy) until nothing more fits;
// kNever only pins (largest first, as before lossless packs); kAlways holds every unit it
// can (largest first) and pins only units that cannot be held: the two extremes, for
// measuring what holding costs and saves.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace nj {

enum class UnitResidency : uint8_t { kStreamed, kHeld, kPinned };

enum class PinCompressed { kAuto, kNever, kAlways };
const char* pin_compressed_name(PinCompressed p);  // "auto", "no", "yes"

struct TrunkUnitCost {
  uint64_t buffer_bytes = 0;   // decoded, in memory (pinned)
  uint64_t read_bytes = 0;     // from disk per token (streamed)
  uint64_t held_bytes = 0;     // stored, in memory (held); 0 when it cannot be held
  uint64_t decoded_bytes = 0;  // decoded per use (0 for raw units)
};

struct TrunkCostModel {
  double bandwidth_gbps = 2.6;
  double decode_gbps = 8.0;
  PinCompressed policy = PinCompressed::kAuto;
};

double unit_seconds_per_token(const TrunkUnitCost& u, UnitResidency r, const TrunkCostModel& m);

// Chooses a residency per unit. `total_bytes` is the planned memory for a choice (ring,
// buffers and all); a choice is kept only if it fits `budget`. REQUIRES: all-streamed fits.
std::vector<UnitResidency> choose_trunk_residency(
    const std::vector<TrunkUnitCost>& units, const TrunkCostModel& model, uint64_t budget,
    const std::function<uint64_t(const std::vector<UnitResidency>&)>& total_bytes);

}  // namespace nj
