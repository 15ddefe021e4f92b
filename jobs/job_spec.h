// A validated job spec: the structs `nightjar submit` builds from a YAML file and stores,
// and the per-item generation settings `nightjar run` reads back.
//
// The spec format (keys, types, defaults) is documented in jobs/spec_parser.h; the
// machine-readable contract (schemas/job.schema.json) follows with the classification kind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/sampler.h"
#include "engine/util/status.h"

namespace nj::jobs {

// The job kinds. `generate` runs a prompt to `max_tokens`; the classification kind is
// added next to it (its parser hooks in where spec_parser.cpp dispatches on `kind`).
enum class JobKind { kGenerate };

const char* job_kind_name(JobKind kind);
// "generate" -> kGenerate. InvalidArgument for anything else.
Result<JobKind> parse_job_kind(const std::string& name);

// Per-item generation settings: the job's `defaults`, overridden key by key per item.
struct GenerateParams {
  int max_tokens = 64;      // a short answer unless the spec asks for more
  SamplingParams sampling;  // temperature 0 (greedy), top_k 0, top_p 1, seed 0
  // Generation stops at the tokenizer's end-of-sequence token (as `nightjar generate` does)
  // unless this is set; a model without a tokenizer always runs to max_tokens.
  bool ignore_eos = false;
};

// Stored with each item as JSON:
// {"max_tokens":..,"temperature":..,"top_k":..,"top_p":..,"seed":..}.
nlohmann::json generate_params_to_json(const GenerateParams& p);
// The inverse; InvalidArgument naming the field on a missing or mistyped value (a store
// written by a bug or by hand).
Result<GenerateParams> generate_params_from_json(const nlohmann::json& j);

struct ItemSpec {
  std::string id;                          // `id`: the custom_id, unique within the job
  std::string where;                       // "<spec>:<line>:<col>" of the item (for messages)
  std::optional<std::string> prompt_text;  // `prompt:` text, tokenized at submit
  std::string prompt_where;                // "<spec>:<line>:<col>" of the prompt value
  std::vector<int32_t> prompt_ids;         // `prompt_ids:`, or the tokenized `prompt:`
  GenerateParams params;
};

struct JobSpec {
  std::string source;  // the spec file as named on the command line
  std::string name;    // `name`
  JobKind kind = JobKind::kGenerate;
  std::string model_dir;                 // `model`, made absolute against the spec's directory
  std::string model_where;               // "<spec>:<line>:<col>" of the model value
  std::optional<uint64_t> memory_bytes;  // `memory`; absent = the engine's default
  int max_attempts = 3;  // failed attempts (errors, lost processes) before an item fails
  int priority = 0;      // higher runs first; FIFO among equals
  std::vector<ItemSpec> items;
};

// The longest sequence an item of the job runs: prompt + max_tokens (what the engine's
// memory plan must hold state for). REQUIRES: prompts tokenized (spec_model.h).
int64_t job_max_context(const JobSpec& spec);

// The job-level settings as canonical JSON, stored with the job: name, kind, model,
// memory_bytes, max_attempts, priority, source, max_context.
nlohmann::json job_settings_to_json(const JobSpec& spec);

}  // namespace nj::jobs
