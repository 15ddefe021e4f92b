// A validated job spec: the structs `nightjar submit` builds from a YAML file and stores,
// and the per-item generation settings `nightjar run` reads back.
//
// The spec format (keys, types, defaults) is documented in jobs/spec_parser.h (generate)
// and jobs/classify_spec.h (classify).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/session/sampler.h"
#include "engine/util/status.h"
#include "jobs/chat/chat_reply.h"
#include "jobs/spec/output_paths.h"

namespace nj::jobs {

// The job kinds. `generate` runs a prompt to `max_tokens`; `classify` scores a document
// against a fixed label set (jobs/classify_spec.h).
enum class JobKind { kGenerate, kClassify };

// `speculative:` of a generate job (engine/speculative/): draft tokens by prompt lookup and verify
// them exactly (the tokens never change), never, or as the planner decides at the job's
// budget (engine/plan/pass_cost.h, speculation_pays).
enum class SpeculativeMode { kAuto, kOff, kNgram };
const char* speculative_mode_name(SpeculativeMode mode);
// "auto", "off", "ngram"; InvalidArgument naming the known values for anything else.
Result<SpeculativeMode> parse_speculative_mode(const std::string& name);

const char* job_kind_name(JobKind kind);
// "generate" -> kGenerate, "classify" -> kClassify. InvalidArgument for anything else.
Result<JobKind> parse_job_kind(const std::string& name);

// Per-item generation settings: the job's `defaults`, overridden key by key per item.
struct GenerateParams {
  int max_tokens = 64;      // a short answer unless the spec asks for more
  SamplingParams sampling;  // temperature 0 (greedy), top_k 0, top_p 1, seed 0
  // Generation stops at the tokenizer's end-of-sequence token (as `nightjar generate` does)
  // unless this is set; a model without a tokenizer always runs to max_tokens.
  bool ignore_eos = false;
  // Set when the prompt is a chat (OpenAI requests): the output is a chat reply, read into
  // its channels (jobs/chat/chat_reply.h); it ends at <|end_of_msg|> or at a stop string.
  std::optional<ChatReplyOptions> chat;
  // Per generated token, its log-probability and those of the `top_logprobs` most likely
  // ids (engine/session/logprobs.h), stored with the token. Off by default: it costs a pass
  // over the vocabulary's logits per token and a few bytes of store per token.
  bool logprobs = false;
  int top_logprobs = 0;  // 0..kMaxTopLogprobs; only with logprobs
};
inline constexpr int kMaxTopLogprobs = 20;  // the OpenAI API's limit

// Stored with each item as JSON:
// {"max_tokens":..,"temperature":..,"top_k":..,"top_p":..,"seed":..,"ignore_eos":..}, plus
// "chat": chat_reply_to_json(..) for chat prompts and "logprobs": true, "top_logprobs": N
// when asked for (absent otherwise, so plain items store what they always did).
nlohmann::json generate_params_to_json(const GenerateParams& p);
// The inverse; InvalidArgument naming the field on a missing or mistyped value (a store
// written by a bug or by hand).
Result<GenerateParams> generate_params_from_json(const nlohmann::json& j);

struct ItemSpec {
  std::string id;                          // `id`: the custom_id, unique within the job
  std::string where;                       // "<spec>:<line>:<col>" of the item (for messages)
  std::optional<std::string> prompt_text;  // `prompt:` text, tokenized at submit
  std::string prompt_where;                // "<spec>:<line>:<col>" of the prompt value
  std::vector<int32_t> prompt_ids;         // `prompt_ids:`, or the tokenized `prompt:`;
                                           // classify: the document's tokens + the suffix's
  GenerateParams params;
  std::optional<std::string> document;  // classify: the document's text
  // An OpenAI request's fields accepted without effect (user, metadata, ...: openai_batch.h),
  // as given; stored with the item's parameters as "accepted_fields".
  std::optional<nlohmann::json> accepted_fields;
};

// Where an OpenAI batch job's results go when its last item ends (`submit --openai-batch IN
// --output-file OUT [--error-file ERR]`): the Batch API's output file, one line per request
// (runner/results/openai_results.h); with an error file, the lines of requests that did not
// finish go there instead, as OpenAI splits them. Written atomically, checked against
// `rules` (output_paths.h) right before each write.
struct OpenAiOutputs {
  std::string output_file;                // absolute
  std::optional<std::string> error_file;  // absolute
  OutputRules rules;
};

// A classify job's own settings (jobs/classify_spec.h); token ids are filled by
// bind_spec_to_model.
struct ClassifySpec {
  std::string template_text;                         // `template`, as written
  std::string template_where;                        // "<spec>:<line>:<col>" of the template value
  std::string prefix_text;                           // the template before {document}, expanded
  std::string suffix_text;                           // after {document}, expanded, right-trimmed
  std::vector<std::string> labels;                   // `labels`, in order
  std::vector<std::string> label_wheres;             // "<spec>:<line>:<col>" of each label
  std::optional<std::string> output_jsonl;           // `outputs.jsonl`, absolute
  std::optional<std::string> output_csv;             // `outputs.csv`, absolute
  std::string output_jsonl_where, output_csv_where;  // "<spec>:<line>:<col>" of each
  std::string spec_dir;                              // absolute: outputs resolve inside it
  std::optional<std::string> input_jsonl;            // `inputs.jsonl`, absolute
  std::optional<std::string> input_glob;             // `inputs.glob`, absolute pattern
  OutputRules output_rules;                     // set by check_declared_outputs (output_paths.h)
  std::vector<int32_t> prefix_ids;              // the prefix's tokens (prefilled once per job)
  std::vector<int32_t> suffix_ids;              // the suffix's tokens (after every document)
  std::vector<std::vector<int32_t>> label_ids;  // [labels] tokens of " " + label after suffix
};

struct JobSpec {
  std::string source;  // the spec file as named on the command line
  std::string name;    // `name`
  JobKind kind = JobKind::kGenerate;
  std::string model_dir;                 // `model`, made absolute against the spec's directory
  std::string model_where;               // "<spec>:<line>:<col>" of the model value
  std::optional<uint64_t> memory_bytes;  // `memory`; absent = the engine's default
  std::string memory_where;              // "<spec>:<line>:<col>" of the memory value
  int max_attempts = 3;  // failed attempts (errors, lost processes) before an item fails
  int priority = 0;      // higher runs first; FIFO among equals
  SpeculativeMode speculative = SpeculativeMode::kAuto;  // generate only; auto: on where it pays
  std::vector<ItemSpec> items;
  std::optional<ClassifySpec> classify;  // set exactly when kind is classify
  std::optional<OpenAiOutputs> openai_outputs;  // an OpenAI batch job's output files, if asked
};

// The longest sequence an item of the job runs: prompt + max_tokens, or for classify prefix +
// document + suffix + the longest label (what the engine's memory plan must hold state for).
// REQUIRES: prompts tokenized (spec_model.h).
int64_t job_max_context(const JobSpec& spec);
// The same for one item of the job.
int64_t item_max_context(const JobSpec& spec, const ItemSpec& item);

// The job-level settings as canonical JSON, stored with the job: name, kind, model,
// memory_bytes, max_attempts, priority, source, max_context; for classify also "classify":
// classify_settings_to_json; with OpenAI output files "openai_outputs":
// openai_outputs_to_json.
nlohmann::json job_settings_to_json(const JobSpec& spec);

// {"output_file", "error_file" (or null), "rules": output_rules_to_json}, and back
// (InvalidArgument naming the field).
nlohmann::json openai_outputs_to_json(const OpenAiOutputs& o);
Result<OpenAiOutputs> openai_outputs_from_json(const nlohmann::json& j);

// The per-item settings stored with each item: generate_params_to_json for generate, and
// {"max_tokens": longest label in tokens} for classify (its output is the label's tokens).
nlohmann::json item_params_to_json(const JobSpec& spec, const ItemSpec& item);

// What `run` needs of a classify job, stored in the job's settings under "classify":
// {"template", "labels", "label_ids", "prefix_ids", "suffix_ids",
//  "outputs": {"jsonl", "csv", "rules": output_rules_to_json}}.
nlohmann::json classify_settings_to_json(const ClassifySpec& c);

// The settings read back by `run` and `results`.
struct ClassifySettings {
  std::vector<std::string> labels;
  std::vector<std::vector<int32_t>> label_ids;
  std::vector<int32_t> prefix_ids;
  std::vector<int32_t> suffix_ids;
  std::optional<std::string> output_jsonl, output_csv;
  // The rules the outputs were checked against at submit; nullopt for a job stored before
  // they were recorded (the runner then derives them from the spec's path).
  std::optional<OutputRules> output_rules;
};
// InvalidArgument naming the field when the job's settings lack a classify part or it is
// mistyped (a store written by a bug or by hand).
Result<ClassifySettings> classify_settings_from_json(const nlohmann::json& job_settings);

}  // namespace nj::jobs
