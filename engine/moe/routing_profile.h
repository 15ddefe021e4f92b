// What the router did, in the form the planner needs to predict an expert cache's hit rate.
//
// For each MoE layer the profile keeps the LRU stack distance of every expert request: the
// number of distinct experts of that layer requested since the same expert was last
// requested (or "first use"). An LRU cache holding c idle experts of the layer hits exactly
// the requests whose distance is below c (Mattson's stack algorithm), so one recorded run
// predicts the hit rate of every cache size at once. Routing is workload-specific (real
// routers favour some experts, and consecutive tokens reuse them), which is why a measured
// profile predicts far better than the uniform-routing default: the generated benchmark
// model hit 50 % of its requests in a cache sized for 10 % under uniform routing.
//
// It also counts, per layer, the rows that chose each expert, prefill rows included: how
// many distinct experts a window of R rows needs follows from those frequencies (a layer
// sweep reads each once per window), where uniform routing would say E·(1 − (1 − k/E)^R).
//
// File format (JSON, written by `generate --save-routing-profile`):
//   { "format": "nightjar-routing-profile", "version": 2, "model_fingerprint": "<hex>",
//     "tokens": n, "layers": [ {"layer": l, "requests": r, "first_use": f,
//                               "distances": [count of distance 0, 1, ...],
//                               "rows": n, "chosen": [rows that chose expert 0, 1, ...]},
//                              ... ] }
// Version 1 (no "rows" / "chosen") still reads; it predicts the cache, not the windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace nj {

class RoutingProfile {
 public:
  RoutingProfile() = default;
  RoutingProfile(int layers, int num_experts);

  // Records one pass's requests of `layer`. The LRU stack always advances; the histogram
  // counts the requests only when `count` (the planner predicts decode, so prefill passes
  // warm the stack without being counted).
  void record(int layer, const std::vector<int>& experts, bool count = true);
  void add_tokens(uint64_t n) { tokens_ += n; }
  // Records which experts `rows` rows of `layer` chose: end[e + 1] − end[e] rows chose
  // expert e (a row chooses top_k distinct experts), for e < the profile's num_experts.
  void record_choices(int layer, const int32_t* end, int rows);

  bool empty() const { return tokens_ == 0; }
  uint64_t tokens() const { return tokens_; }
  // Fraction of `layer`'s requests an LRU cache of `slots` idle experts would have served;
  // -1 when the layer has no recorded requests.
  double hit_rate(int layer, int slots) const;
  // Expected distinct experts of `layer` that `rows` rows choose, each row drawing as the
  // recorded rows did, independently: Σ_e 1 − (1 − n_e / n)^rows. -1 when the layer has no
  // recorded choices (a version 1 profile, or a dense layer).
  double expected_distinct(int layer, int rows) const;

  std::string to_json(uint64_t model_fingerprint) const;
  // Parses a profile. InvalidArgument / Corruption naming `name`; FailedPrecondition when it
  // was recorded on another model.
  static Result<RoutingProfile> parse(const std::string& text, const std::string& name, uint64_t model_fingerprint);

 private:
  struct Layer {
    std::vector<int> stack;           // most recent first
    std::vector<uint64_t> distances;  // histogram
    uint64_t requests = 0;
    uint64_t first_use = 0;
    uint64_t rows = 0;             // rows whose choices `chosen` counts
    std::vector<uint64_t> chosen;  // [num_experts] rows that chose each expert
  };
  std::vector<Layer> layers_;
  uint64_t tokens_ = 0;
};

}  // namespace nj
