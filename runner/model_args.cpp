// Shared model options.
#include "runner/model_args.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>

#include "engine/ops/cpu.h"

namespace nj::runner {

void add_model_options(CLI::App& sub, ModelArgs& args) {
  sub.add_option("--model", args.model, "Model directory (config.json + safetensors)")->required();
  add_compute_options(sub, args);
  sub.add_option("--prefill-chunk", args.prefill_chunk,
                 "Tokens per prefill pass (default 64); larger reads less per token, uses more scratch")
      ->check(CLI::PositiveNumber);
}

void add_compute_options(CLI::App& sub, ModelArgs& args) {
  sub.add_option("--threads", args.threads, "Compute threads (default: all cores); results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--simd", args.simd, "Force a SIMD level: scalar, avx2 or avx512 (results do not depend on it)");
}

Status apply_compute_options(const ModelArgs& args) {
  if (!args.simd.empty()) {
    NJ_ASSIGN_OR_RETURN(SimdLevel level, parse_simd_level(args.simd));
    NJ_RETURN_IF_ERROR(force_simd_level(level).with_context("--simd"));
  }
  if (args.threads > 0) omp_set_num_threads(args.threads);
  return Status();
}

Result<std::unique_ptr<Model>> open_model(const ModelArgs& args) {
  NJ_RETURN_IF_ERROR(apply_compute_options(args));
  return Model::open(args.model);
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
