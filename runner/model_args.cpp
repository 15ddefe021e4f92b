// Shared model options.
#include "runner/model_args.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "engine/ops/cpu.h"
#include "engine/util/sysinfo.h"
#include "engine/util/units.h"

namespace nj::runner {

void add_model_options(CLI::App& sub, ModelArgs& args) {
  sub.add_option("--model", args.model, "Model directory (config.json + safetensors)")->required();
  sub.add_option("--threads", args.threads, "Compute threads (default: all cores); results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--simd", args.simd, "Force a SIMD level: scalar, avx2 or avx512 (results do not depend on it)");
  sub.add_option("--prefill-chunk", args.prefill_chunk,
                 "Tokens per prefill pass (default 64); larger reads less per token, uses more scratch")
      ->check(CLI::PositiveNumber);
  sub.add_option("--memory", args.memory,
                 "Memory budget, e.g. 8GiB: weights beyond it stream from disk (default: all resident). "
                 "Changes speed, never the tokens");
  sub.add_option("--max-context", args.max_context,
                 "Positions of sequence state the budget reserves (default: what this run needs)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--io-threads", args.io_threads, "Reads in flight when streaming (default 8)")
      ->check(CLI::PositiveNumber);
  sub.add_flag("--stats", args.stats, "Print I/O and compute figures (bytes read, waits, hit rate, peak RSS)");
}

Result<ModelOptions> model_options(const ModelArgs& args, const RunShape& shape) {
  ModelOptions o;
  if (!args.memory.empty()) {
    NJ_ASSIGN_OR_RETURN(o.memory_bytes, parse_bytes(args.memory));
    if (o.memory_bytes == 0) return invalid_argument("--memory must be more than 0 (omit it to keep everything resident)");
  }
  o.plan.prefill_chunk = std::max(1, std::min(args.prefill_chunk, shape.longest_feed));
  o.plan.max_context = args.max_context > 0 ? args.max_context : std::max(1, shape.context);
  o.plan.all_logits = shape.all_logits;
  o.streaming.io_threads = args.io_threads;
  return o;
}

Result<std::unique_ptr<Model>> open_model(const ModelArgs& args, const RunShape& shape) {
  if (!args.simd.empty()) {
    NJ_ASSIGN_OR_RETURN(SimdLevel level, parse_simd_level(args.simd));
    NJ_RETURN_IF_ERROR(force_simd_level(level).with_context("--simd"));
  }
  if (args.threads > 0) omp_set_num_threads(args.threads);
  auto options = model_options(args, shape);
  if (!options.ok()) return options.status().with_context("--memory");
  return Model::open(args.model, *options);
}

nlohmann::json stats_json(Model& model, const ForwardStats& f) {
  const WeightStats w = model.weights().stats();
  const uint64_t read = w.trunk_bytes_read + w.expert_bytes_read + w.embedding_bytes_read + w.head_bytes_read;
  const uint64_t lookups = w.expert_hits + w.expert_misses;
  nlohmann::json j;
  j["bytes_read"] = {{"trunk", w.trunk_bytes_read + w.head_bytes_read}, {"experts", w.expert_bytes_read},
                     {"embedding", w.embedding_bytes_read}, {"total", read}};
  j["io_wait_s"] = f.wait_s;
  j["compute_s"] = f.compute_s;
  j["read_busy_s"] = w.read_s;
  j["read_gbps"] = w.read_s > 0 ? static_cast<double>(read) / w.read_s / 1e9 : 0.0;
  j["expert_cache_hit_rate"] = lookups ? static_cast<double>(w.expert_hits) / static_cast<double>(lookups) : 0.0;
  j["expert_hits"] = w.expert_hits;
  j["expert_misses"] = w.expert_misses;
  j["peak_rss_bytes"] = peak_rss_bytes();
  j["memory_budget_bytes"] = model.plan().budget_bytes;
  j["tokens"] = f.tokens;
  return j;
}

std::string stats_text(const nlohmann::json& s) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "read %s (trunk %s, experts %s) at %.2f GB/s while reading; waited %.3f s on I/O, computed %.3f s; "
                "expert cache hit rate %.1f%%; peak RSS %s",
                format_bytes(s["bytes_read"]["total"].get<uint64_t>()).c_str(),
                format_bytes(s["bytes_read"]["trunk"].get<uint64_t>()).c_str(),
                format_bytes(s["bytes_read"]["experts"].get<uint64_t>()).c_str(), s["read_gbps"].get<double>(),
                s["io_wait_s"].get<double>(), s["compute_s"].get<double>(),
                100 * s["expert_cache_hit_rate"].get<double>(), format_bytes(s["peak_rss_bytes"].get<uint64_t>()).c_str());
  return buf;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  auto bad = [&] { return invalid_argument("invalid token id list '" + text + "' (expected e.g. 3,7,11)"); };
  while (i < text.size()) {
    size_t end = text.find(',', i);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(i, end - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos) return bad();
    errno = 0;
    long long v = std::strtoll(item.c_str(), nullptr, 10);
    if (errno || v > INT32_MAX) return bad();
    ids.push_back(static_cast<int32_t>(v));
    i = end + 1;
    if (end == text.size() - 1) return bad();  // trailing comma
  }
  if (ids.empty()) return bad();
  return ids;
}

}  // namespace nj::runner
