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
#include "jobs/job_spec.h"

namespace nj::jobs {

// Validates `spec` against its model and fills the prompt ids of text prompts. Reads
// config.json and, when a prompt is text, the tokenizer (never the weights).
// Returns InvalidArgument listing every problem as "<spec>:<line>:<col>: <key>: <what>".
Status bind_spec_to_model(JobSpec& spec);

// The same against a loaded config and tokenizer (null: the model has none, so text prompts
// are errors).
Status check_spec_against_model(JobSpec& spec, const ModelConfig& config,
                                const Tokenizer* tokenizer);

}  // namespace nj::jobs
