// Shared model options.
#include "runner/run/model_args.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "engine/runtime/model.h"
#include "engine/io/file.h"
#include "engine/io/read_pool.h"
#include "engine/ops/cpu.h"
#include "engine/util/process.h"
#include "engine/io/sysinfo.h"
#include "engine/util/units.h"

namespace nj::runner {

void add_model_options(CLI::App& sub, ModelArgs& args) {
  sub.add_option("--model", args.model, "Model directory (config.json + safetensors)")->required();
  add_compute_options(sub, args);
  sub.add_option(
         "--prefill-chunk", args.prefill_chunk,
         "Tokens per prefill pass; larger reads less per token, uses more activation memory")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub.add_option(
      "--memory", args.memory,
      "Memory budget, e.g. 8GiB: weights beyond it stream from disk (default: all resident). "
      "Changes speed, never the tokens");
  sub.add_option("--max-context", args.max_context,
                 "Positions of sequence state the budget reserves (default: what this run needs)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--io-threads", args.io_threads,
                 "Reads in flight when streaming (default 8, at most " +
                     std::to_string(kMaxIoThreads) + ")")
      ->check(CLI::Range(1, kMaxIoThreads));
  sub.add_flag("--stats", args.stats,
               "Print I/O and compute figures (bytes read, waits, hit rate, peak RSS)");
  sub.add_option("--pack", args.pack_dir,
                 "Directory of a packed trunk written by `nightjar pack --out` (default: "
                 "the model directory)");
  sub.add_flag("--no-pack", args.no_pack,
               "Read the trunk from the shards even if a valid pack exists");
  add_pin_compressed_option(sub, args.pin_compressed);
}

void add_pin_compressed_option(CLI::App& sub, std::string& value) {
  sub.add_option(
         "--pin-compressed", value,
         "Lossless pack under --memory: keep trunk units in RAM compressed (decoded on each use) "
         "where the planner predicts it pays (auto, the default), wherever they fit (yes), or "
         "never (no)")
      ->check(CLI::IsMember({"auto", "yes", "no"}));
}

Result<PinCompressed> parse_pin_compressed(const std::string& value) {
  if (value == "auto") return PinCompressed::kAuto;
  if (value == "yes") return PinCompressed::kAlways;
  if (value == "no") return PinCompressed::kNever;
  return invalid_argument("--pin-compressed must be auto, yes or no, not '" + value + "'");
}

namespace {

// The planner's refusal of a --memory budget (below the minimum) as the bad input it is
// (exit 3, as a spec's `memory:` below the minimum), naming the flag.
Status budget_error(const Status& planner) {
  if (planner.code() != StatusCode::kResourceExhausted) return planner;
  return invalid_argument("--memory: " + planner.message());
}

}  // namespace

Result<ModelOptions> model_options(const ModelArgs& args, const RunShape& shape) {
  ModelOptions o;
  if (!args.memory.empty()) {
    NJ_ASSIGN_OR_RETURN(o.memory_bytes, parse_size_flag(args.memory));
    if (o.memory_bytes == 0)
      return invalid_argument("--memory must be more than 0 (omit it to keep everything resident)");
  }
  o.plan.prefill_chunk = std::max(1, std::min(args.prefill_chunk, shape.longest_feed));
  o.plan.max_context = args.max_context > 0 ? args.max_context : std::max(1, shape.context);
  o.plan.all_logits = shape.all_logits;
  o.plan.batch = std::max(1, shape.batch);
  o.plan.draft_tokens = std::max(0, shape.draft_tokens);
  o.plan.kda_rollback = shape.kda_rollback;
  o.streaming.io_threads = args.io_threads;
  NJ_ASSIGN_OR_RETURN(o.plan.pin_compressed, parse_pin_compressed(args.pin_compressed));
  o.use_pack = !args.no_pack;
  o.pack_dir = args.pack_dir;
  return o;
}

Result<int> max_batch_for(const ModelArgs& args, const RunShape& shape) {
  NJ_ASSIGN_OR_RETURN(ModelOptions o, model_options(args, shape));
  std::string pack_warning;
  NJ_ASSIGN_OR_RETURN(ModelHeaders headers, open_model_headers(args.model, o.use_pack, &pack_warning));
  o.plan.batch = 1;
  auto plan = plan_residency(*headers.layout, o.memory_bytes, o.plan);
  if (!plan.ok()) return budget_error(plan.status());
  return plan->max_batch;
}

void add_compute_options(CLI::App& sub, ModelArgs& args) {
  sub.add_option("--threads", args.threads,
                 "Compute threads (default: all cores if that measurably helps here, else 1; at "
                 "most " + std::to_string(kMaxComputeThreads) + "); results do not depend on it")
      ->check(CLI::Range(0, kMaxComputeThreads));
  sub.add_option("--simd", args.simd,
                 "Force a SIMD level: scalar, avx2 or avx512 (results do not depend on it)");
}

Status apply_compute_options(const ModelArgs& args) {
  if (!args.simd.empty()) {
    NJ_ASSIGN_OR_RETURN(SimdLevel level, parse_simd_level(args.simd));
    NJ_RETURN_IF_ERROR(force_simd_level(level).with_context("--simd"));
  }
  // Without --threads, use every CPU only where that measurably speeds compute up.
  const int threads = args.threads > 0 ? args.threads : calibrate_compute_threads();
  omp_set_num_threads(threads);
  spdlog::debug("compute threads: {}{}", threads,
                args.threads > 0 ? " (--threads)" : " (calibrated)");
  return Status();
}

Result<std::unique_ptr<Model>> open_model(const ModelArgs& args, const RunShape& shape) {
  NJ_RETURN_IF_ERROR(apply_compute_options(args));
  auto options = model_options(args, shape);
  if (!options.ok()) return options.status().with_context("--memory");
  auto model = Model::open(args.model, *options);
  if (model.ok() || model.status().code() != StatusCode::kResourceExhausted ||
      options->memory_bytes == 0)
    return model;
  // The plan's refusal (a budget below the minimum) is bad input; the machine's (a thread
  // it would not start) is not. Only the first fails again without opening anything.
  std::string pack_warning;
  auto headers =
      open_model_headers(args.model, options->use_pack, &pack_warning, options->pack_dir);
  PlanOptions plan = options->plan;
  plan.io_threads = options->streaming.io_threads;
  if (headers.ok() && !plan_residency(*headers->layout, options->memory_bytes, plan).ok())
    return budget_error(model.status());
  return model;
}

nlohmann::json stats_json(Model& model, const ForwardStats& f) {
  const WeightStats w = model.weights().stats();
  const uint64_t read = weight_bytes_read(w);
  const uint64_t lookups = w.expert_hits + w.expert_misses;
  nlohmann::json j;
  j["bytes_read"] = {{"trunk", w.trunk_bytes_read + w.head_bytes_read},
                     {"experts", w.expert_bytes_read},
                     {"embedding", w.embedding_bytes_read},
                     {"total", read}};
  // Lossless packs: what the trunk bytes read decode to, and the decoding's thread time.
  j["trunk_raw_bytes"] = w.trunk_raw_bytes;
  j["decoded_bytes"] = w.decoded_bytes;
  j["decode_s"] = w.decode_s;
  j["io_wait_s"] = f.wait_s;
  j["compute_s"] = f.compute_s;
  j["read_busy_s"] = w.read_s;
  j["read_gbps"] = w.read_s > 0 ? static_cast<double>(read) / w.read_s / 1e9 : 0.0;
  j["expert_cache_hit_rate"] =
      lookups ? static_cast<double>(w.expert_hits) / static_cast<double>(lookups) : 0.0;
  j["expert_hits"] = w.expert_hits;
  j["expert_misses"] = w.expert_misses;
  j["peak_rss_bytes"] = peak_rss_bytes();
  j["memory_budget_bytes"] = model.plan().budget_bytes;
  j["tokens"] = f.tokens;
  // Per pass: a pass serves every sequence in it, so these are what batching divides.
  const double passes = static_cast<double>(std::max<uint64_t>(1, f.passes));
  j["passes"] = f.passes;
  j["per_pass"] = {{"sequences", static_cast<double>(f.sequence_passes) / passes},
                   {"rows", static_cast<double>(f.tokens) / passes},
                   {"bytes_read", static_cast<double>(read) / passes},
                   {"compute_s", f.compute_s / passes},
                   {"io_wait_s", f.wait_s / passes},
                   {"distinct_experts_per_layer",
                    f.moe_layer_passes ? static_cast<double>(f.distinct_experts) / static_cast<double>(f.moe_layer_passes)
                                       : 0.0}};
  return j;
}

std::string stats_text(const nlohmann::json& s) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "read %s (trunk %s, %s raw; experts %s) at %.2f GB/s while reading; decoded %.3f s; "
      "waited %.3f s on I/O, "
      "computed %.3f s; "
      "expert cache hit rate %.1f%%; peak RSS %s",
      format_bytes(s["bytes_read"]["total"].get<uint64_t>()).c_str(),
      format_bytes(s["bytes_read"]["trunk"].get<uint64_t>()).c_str(),
      format_bytes(s["trunk_raw_bytes"].get<uint64_t>()).c_str(),
      format_bytes(s["bytes_read"]["experts"].get<uint64_t>()).c_str(),
      s["read_gbps"].get<double>(), s["decode_s"].get<double>(), s["io_wait_s"].get<double>(),
      s["compute_s"].get<double>(), 100 * s["expert_cache_hit_rate"].get<double>(),
      format_bytes(s["peak_rss_bytes"].get<uint64_t>()).c_str());
  return buf;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& text, bool allow_empty) {
  std::vector<int32_t> ids;
  const std::string_view all(text);
  if (all.find_first_not_of(" \t") == std::string_view::npos) {
    if (allow_empty) return ids;
    return invalid_argument("no token ids given (expected e.g. 3,7,11)");
  }
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    if (comma == std::string_view::npos) comma = all.size();
    std::string_view item = all.substr(pos, comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    int32_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || id < 0)
      return invalid_argument("'" + std::string(item) + "' is not a token id in '" + text +
                              "' (expected a list like 3,7,11)");
    ids.push_back(id);
    pos = comma + 1;
  }
  return ids;
}

Result<std::string> read_text_input(const std::string& path, size_t max_bytes) {
  if (path != "-") {
    std::error_code ec;
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_bytes)
      return invalid_argument(jobs::document_too_large(path, static_cast<size_t>(size)));
    return read_small_file(path, max_bytes);
  }
  std::string text;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    text.append(buf, n);
    if (text.size() > max_bytes)
      return invalid_argument(jobs::document_too_large("standard input", text.size()) +
                              " (read so far)");
  }
  if (std::ferror(stdin)) return io_error("standard input: read failed");
  return text;
}

Result<uint64_t> parse_size_flag(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t");
  const std::string s = first == std::string::npos
                            ? std::string()
                            : text.substr(first, text.find_last_not_of(" \t") - first + 1);
  if (!s.empty() && s.find_first_not_of("0123456789.") == std::string::npos)
    return invalid_argument("size '" + text + "' has no unit: write e.g. " + s + "GiB or " + s +
                            "MiB (" + s + "B for bytes)");
  return parse_bytes(text);
}

}  // namespace nj::runner
