// `nightjar generate --prompts-file F.jsonl`: many prompts decoded together, each pass over
// the weights serving up to --batch sequences (LockstepGenerator). Every sequence's tokens
// equal what `generate --prompt-ids` gives it alone with the same settings.
//
// Input, one JSON object per line (blank lines skipped):
//   {"id": "...", "prompt_ids": [3, 7, 11]}  or  {"id": "...", "prompt": "text"}
// optionally with "max_tokens", "temperature" and "seed" (overriding the flags). Ids are
// unique strings. With --speculative ngram every sequence speculates (lockstep.h); its
// tokens are still exactly plain decoding's.
#include "runner/generate/generate_batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/forward/forward.h"
#include "engine/io/file.h"
#include "engine/plan/pass_cost.h"
#include "jobs/inputs/document_inputs.h"
#include "runner/item/clock.h"
#include "runner/run/lockstep.h"

namespace nj::runner {
namespace {

// The largest prompts file, as a job's JSON Lines input (jobs/inputs/document_inputs.cpp).
constexpr size_t kMaxPromptsFileBytes = 1u << 30;

// Parses the prompts file. Errors name the file and line.
Result<std::vector<GenerationRequest>> read_prompts(const BatchGenerateArgs& a, const Tokenizer* tokenizer) {
  // The limits of a job's JSON Lines input: a regular file (never a FIFO or a device) of at
  // most kMaxPromptsFileBytes, each prompt's text at most a document's 16 MiB.
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(a.prompts_file, ec);
      !ec && size > kMaxPromptsFileBytes)
    return invalid_argument(a.prompts_file + ": the prompts file is " + std::to_string(size) +
                            " bytes, more than the " + std::to_string(kMaxPromptsFileBytes >> 20) +
                            " MiB it may have");
  auto all = read_small_file(a.prompts_file, kMaxPromptsFileBytes);
  if (!all.ok()) return all.status();
  std::vector<GenerationRequest> out;
  std::unordered_set<std::string> ids;
  const std::string& text = *all;
  int number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    const std::string where = a.prompts_file + ":" + std::to_string(number) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument(where + "not JSON: " + e.what());
    }
    if (!j.is_object()) return invalid_argument(where + "each line must be a JSON object");
    for (const auto& [key, value] : j.items())
      if (key != "id" && key != "prompt" && key != "prompt_ids" && key != "max_tokens" && key != "temperature" &&
          key != "seed")
        return invalid_argument(where + "unknown key '" + key +
                                "' (expected id, prompt or prompt_ids, max_tokens, temperature, seed)");
    GenerationRequest r;
    if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
      return invalid_argument(where + "'id' must be a non-empty string");
    r.id = j["id"].get<std::string>();
    if (!ids.insert(r.id).second) return invalid_argument(where + "id '" + r.id + "' appears twice");
    if (j.contains("prompt") == j.contains("prompt_ids"))
      return invalid_argument(where + "give exactly one of 'prompt' and 'prompt_ids'");
    if (j.contains("prompt_ids")) {
      const auto& p = j["prompt_ids"];
      if (!p.is_array() || p.empty()) return invalid_argument(where + "'prompt_ids' must be a non-empty array");
      for (const auto& v : p) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= a.vocab)
          return invalid_argument(where + "'prompt_ids' holds " + v.dump() + ", not a token id (0.." +
                                  std::to_string(a.vocab - 1) + ")");
        r.prompt.push_back(v.get<int32_t>());
      }
    } else {
      if (!j["prompt"].is_string()) return invalid_argument(where + "'prompt' must be a string");
      const size_t n = j["prompt"].get_ref<const std::string&>().size();
      if (n > jobs::kMaxDocumentBytes)
        return invalid_argument(where + jobs::document_too_large("'prompt'", n));
      if (!tokenizer)
        return invalid_argument(where + "a text prompt needs the model's tokenizer (tiktoken.model); give prompt_ids");
      r.prompt = tokenizer->encode(j["prompt"].get<std::string>());
      if (r.prompt.empty()) return invalid_argument(where + "the prompt is empty");
    }
    r.max_tokens = a.max_tokens;
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 0 ||
          j["max_tokens"].get<int64_t>() > (1 << 30))
        return invalid_argument(where + "'max_tokens' must be a non-negative integer");
      r.max_tokens = j["max_tokens"].get<int>();
    }
    r.sampling = a.sampling;
    if (j.contains("temperature")) {
      if (!j["temperature"].is_number()) return invalid_argument(where + "'temperature' must be a number");
      r.sampling.temperature = j["temperature"].get<float>();
    }
    if (j.contains("seed")) {
      if (!j["seed"].is_number_unsigned()) return invalid_argument(where + "'seed' must be a non-negative integer");
      r.sampling.seed = j["seed"].get<uint64_t>();
    }
    if (Status s = validate_sampling(r.sampling); !s.ok()) return invalid_argument(where + s.message());
    r.eos = tokenizer && !a.ignore_eos ? tokenizer->eos_id() : -1;
    out.push_back(std::move(r));
  }
  if (out.empty()) return invalid_argument(a.prompts_file + ": no prompts");
  return out;
}

}  // namespace

Result<BatchGeneration> generate_batch(const BatchGenerateArgs& a,
                                       const std::optional<Tokenizer>& tokenizer) {
  BatchGeneration g;
  NJ_ASSIGN_OR_RETURN(g.requests, read_prompts(a, tokenizer ? &*tokenizer : nullptr));
  const std::vector<GenerationRequest>* requests = &g.requests;
  int context = 1;
  for (const auto& r : *requests)
    context = std::max(context, static_cast<int>(r.prompt.size()) + std::max(0, r.max_tokens));
  const int n = static_cast<int>(requests->size());

  // The batch: --batch, else as many as the budget holds (all of them when resident).
  const auto t_load = Clock::now();
  RunShape shape{context, a.model.prefill_chunk, false};
  int batch = a.batch > 0 ? a.batch : n;
  shape.batch = std::min(batch, n);
  shape.draft_tokens = a.draft_tokens;
  shape.kda_rollback = a.kda_rollback;
  if (a.batch == 0 && !a.model.memory.empty()) {
    auto headers = max_batch_for(a.model, shape);
    if (!headers.ok()) return headers.status();
    shape.batch = std::max(1, std::min(*headers, n));
  }
  batch = shape.batch;
  auto model = open_model(a.model, shape);
  if (!model.ok()) return model.status();
  // With speculation, the drafts the budget holds beside plain decoding's plan (planner.h,
  // step 4): never more than asked for, possibly none (then every pass is plain).
  PlanOptions po = (*model)->plan_options();
  po.draft_tokens = (*model)->plan().draft_tokens;
  if (a.draft_tokens > 0 && po.draft_tokens < a.draft_tokens)
    spdlog::warn("--speculative: the budget leaves room for {} drafted tokens per sequence and pass "
                 "(asked for {}); drafts never take memory from the weights",
                 po.draft_tokens, a.draft_tokens);
  const ActivationShape planned = planned_activation_shape(po);
  ForwardOptions fo{planned.rows, batch, po.max_context, false};
  BatchSpeculation speculation;
  if (po.draft_tokens > 0) {
    fo.tentative_rows = 1 + po.draft_tokens;
    fo.tentative_sequences = batch;
    fo.kda_rollback = a.kda_rollback;
    speculation = BatchSpeculation{po.draft_tokens, pass_cost((*model)->layout(), (*model)->plan())};
  }
  Forward forward((*model)->config(), (*model)->weights(), fo);
  LockstepGenerator gen(forward, batch, planned.rows, a.model.prefill_chunk, speculation);
  for (auto& r : *requests) gen.add(r);
  const double load_s = seconds_since(t_load);

  const auto t_run = Clock::now();
  std::vector<GenerationResult> finished;
  while (!gen.done())
    NJ_RETURN_IF_ERROR(gen.step(&finished));
  const double run_s = seconds_since(t_run);

  // Results in input order.
  for (const auto& r : *requests)
    for (auto& f : finished)
      if (f.id == r.id) g.results.push_back(std::move(f));
  for (const auto& r : g.results) g.generated += r.output.size();
  g.batch = batch;
  g.max_draft_tokens = po.draft_tokens;
  g.load_s = load_s;
  g.run_s = run_s;
  g.stats = stats_json(**model, forward.stats());
  g.passes = forward.stats().passes;
  g.max_sequences_per_pass = forward.stats().max_sequences;
  return g;
}

nlohmann::json batch_generation_json(const BatchGenerateArgs& a,
                                     const std::optional<Tokenizer>& tokenizer,
                                     const BatchGeneration& g) {
  nlohmann::json results = nlohmann::json::array();
  for (size_t i = 0; i < g.results.size(); ++i) {
    const GenerationResult& r = g.results[i];
    nlohmann::json j;
    j["id"] = r.id;
    j["output_ids"] = r.output;
    if (tokenizer) j["output_text"] = tokenizer->decode(r.output);
    j["finish_reason"] = finish_reason_name(r.finish);
    j["prompt_tokens"] = g.requests[i].prompt.size();
    j["generated_tokens"] = r.output.size();
    j["usage"] = {{"passes", r.usage.passes},
                  {"max_batch", r.usage.max_batch},
                  {"compute_s", r.usage.compute_s},
                  {"io_wait_s", r.usage.wait_s},
                  {"bytes_read", r.usage.bytes_read}};
    if (a.draft_tokens > 0)
      j["speculation"] = {{"passes", r.speculation.passes},
                          {"drafted", r.speculation.drafted},
                          {"accepted", r.speculation.accepted},
                          {"tokens_per_pass", r.speculation.tokens_per_pass()}};
    results.push_back(j);
  }
  nlohmann::json out;
  out["results"] = results;
  out["batch"] = g.batch;
  if (a.draft_tokens > 0) out["max_draft_tokens"] = g.max_draft_tokens;
  out["timings"] = {{"load_s", g.load_s},
                    {"run_s", g.run_s},
                    {"generated_tokens", g.generated},
                    {"tokens_per_s", g.run_s > 0 ? static_cast<double>(g.generated) / g.run_s : 0.0}};
  nlohmann::json stats = g.stats;
  stats["passes"] = g.passes;
  stats["max_sequences_per_pass"] = g.max_sequences_per_pass;
  out["stats"] = stats;
  return out;
}

std::string batch_generation_text(const std::optional<Tokenizer>& tokenizer,
                                  const BatchGeneration& g) {
  std::string out;
  for (const GenerationResult& r : g.results) {
    std::string text;
    if (tokenizer) {
      text = tokenizer->decode(r.output);
    } else {
      for (size_t i = 0; i < r.output.size(); ++i) text += (i ? " " : "") + std::to_string(r.output[i]);
    }
    out += r.id + "\t" + nlohmann::json(text).dump() + "\n";
  }
  return out;
}

}  // namespace nj::runner
