// Stack-distance routing profiles (see routing_profile.h).
#include "engine/moe/routing_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace nj {

RoutingProfile::RoutingProfile(int layers, int num_experts) : layers_(static_cast<size_t>(layers)) {
  for (auto& l : layers_) {
    l.distances.assign(static_cast<size_t>(num_experts), 0);
    l.chosen.assign(static_cast<size_t>(num_experts), 0);
  }
}

void RoutingProfile::record(int layer, const std::vector<int>& experts, bool count) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  // The experts of one pass are announced together, so each one's distance is measured
  // against the stack as it was before the pass; then they all move to the top.
  for (int e : count ? experts : std::vector<int>{}) {
    L.requests++;
    auto it = std::find(L.stack.begin(), L.stack.end(), e);
    if (it == L.stack.end()) {
      L.first_use++;
      continue;
    }
    const size_t d = static_cast<size_t>(it - L.stack.begin());
    if (d >= L.distances.size()) L.distances.resize(d + 1, 0);
    L.distances[d]++;
  }
  std::vector<int> rest;
  rest.reserve(L.stack.size());
  for (int e : L.stack)
    if (std::find(experts.begin(), experts.end(), e) == experts.end()) rest.push_back(e);
  L.stack = experts;
  L.stack.insert(L.stack.end(), rest.begin(), rest.end());
}

void RoutingProfile::record_choices(int layer, const int32_t* end, int rows) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  L.rows += static_cast<uint64_t>(rows);
  for (size_t e = 0; e < L.chosen.size(); ++e) L.chosen[e] += static_cast<uint64_t>(end[e + 1] - end[e]);
}

double RoutingProfile::expected_distinct(int layer, int rows) const {
  if (layer < 0 || static_cast<size_t>(layer) >= layers_.size()) return -1;
  const Layer& L = layers_[static_cast<size_t>(layer)];
  if (L.rows == 0) return -1;
  double distinct = 0;
  for (uint64_t n : L.chosen) {
    if (n == 0) continue;
    const double p = std::min(1.0, static_cast<double>(n) / static_cast<double>(L.rows));
    distinct += 1.0 - std::pow(1.0 - p, rows);
  }
  return distinct;
}

double RoutingProfile::hit_rate(int layer, int slots) const {
  if (layer < 0 || static_cast<size_t>(layer) >= layers_.size()) return -1;
  const Layer& L = layers_[static_cast<size_t>(layer)];
  if (L.requests == 0) return -1;
  uint64_t hits = 0;
  for (size_t d = 0; d < L.distances.size() && static_cast<int>(d) < slots; ++d) hits += L.distances[d];
  return static_cast<double>(hits) / static_cast<double>(L.requests);
}

std::string RoutingProfile::to_json(uint64_t fingerprint) const {
  nlohmann::json j;
  char fp[32];
  std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(fingerprint));
  j["format"] = "nightjar-routing-profile";
  j["version"] = 2;
  j["model_fingerprint"] = fp;
  j["tokens"] = tokens_;
  j["layers"] = nlohmann::json::array();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    if (L.requests == 0 && L.rows == 0) continue;
    std::vector<uint64_t> d = L.distances;
    while (!d.empty() && d.back() == 0) d.pop_back();
    j["layers"].push_back({{"layer", l},
                           {"requests", L.requests},
                           {"first_use", L.first_use},
                           {"distances", d},
                           {"rows", L.rows},
                           {"chosen", L.chosen}});
  }
  return j.dump() + "\n";
}

Result<RoutingProfile> RoutingProfile::parse(const std::string& text, const std::string& name, uint64_t fingerprint) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(name + ": not a routing profile (invalid JSON: " + e.what() + ")");
  }
  try {
    const int version = j.value("version", 0);
    if (j.value("format", "") != "nightjar-routing-profile" || (version != 1 && version != 2))
      return invalid_argument(name + ": not a nightjar routing profile of version 1 or 2");
    char fp[32];
    std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(fingerprint));
    if (j.value("model_fingerprint", "") != fp)
      return failed_precondition(name + ": recorded on another model (fingerprint " +
                                 j.value("model_fingerprint", "?") + ", this model " + fp + ")");
    RoutingProfile p;
    p.tokens_ = j.at("tokens").get<uint64_t>();
    for (const auto& l : j.at("layers")) {
      const size_t layer = l.at("layer").get<size_t>();
      if (layer > 100000) return corruption(name + ": layer " + std::to_string(layer) + " out of range");
      if (p.layers_.size() <= layer) p.layers_.resize(layer + 1);
      Layer& L = p.layers_[layer];
      L.requests = l.at("requests").get<uint64_t>();
      L.first_use = l.at("first_use").get<uint64_t>();
      L.distances = l.at("distances").get<std::vector<uint64_t>>();
      if (version >= 2) {
        L.rows = l.at("rows").get<uint64_t>();
        L.chosen = l.at("chosen").get<std::vector<uint64_t>>();
        uint64_t choices = 0;
        for (uint64_t n : L.chosen) {
          if (n > L.rows)
            return corruption(name + ": layer " + std::to_string(layer) +
                              ": an expert chosen by more rows than it recorded");
          choices += n;
        }
        if (L.rows > 0 && choices == 0)
          return corruption(name + ": layer " + std::to_string(layer) + ": rows with no choices");
      }
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return corruption(name + ": malformed routing profile: " + e.what());
  }
}

}  // namespace nj
