// The checks of a job spec that need its model: the model directory exists and its
// config parses, text prompts are tokenized with the model's tokenizer (a clear error when
// the model has none), and every prompt id is inside the vocabulary. For classify jobs the
// template, labels and documents are tokenized (the tokenizer is required) and the labels'
// token trie is built (label_trie.h). Run by `submit`, so a job that cannot run is rejected
// before anything is stored.
#pragma once

#include "engine/model/config.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/status.h"
#include "jobs/spec/job_spec.h"

namespace nj::jobs {

// Validates `spec` against its model and fills the prompt ids of text prompts. Reads
// config.json and, when a prompt is text, the tokenizer (never the weights).
// Returns InvalidArgument listing every problem as "<spec>:<line>:<col>: <key>: <what>".
Status bind_spec_to_model(JobSpec& spec);

// The model's maximum context and where it comes from ("config.json
// max_position_embeddings", or the tokenizer's model_max_length when smaller), if the model
// states one.
std::optional<std::pair<int64_t, std::string>> model_max_context(const std::string& dir);

// The same against a loaded config and tokenizer (null: the model has none, so text prompts
// are errors).
Status check_spec_against_model(JobSpec& spec, const ModelConfig& config,
                                const Tokenizer* tokenizer);

// REQUIRES: prompts tokenized. The checks of what a run of the job will need from its model:
//   - every item's context (prompt + max_tokens; for classify prefix + document + suffix +
//     the longest label) is within the model's maximum: the smaller of config.json's
//     `max_position_embeddings` (top level or text_config) and tokenizer_config.json's
//     `model_max_length`, when the model gives either;
//   - `memory`, when given, is at least the minimum `run` needs for the job (the plan at
//     the job's longest context, the default prefill chunk, a logits row per replayed token,
//     and for classify a second sequence state). Reads the safetensors headers.
// InvalidArgument listing the problems as "<where>: <key>: <what>".
Status check_job_fits_model(const JobSpec& spec);

}  // namespace nj::jobs
