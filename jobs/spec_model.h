// The checks of a job spec that need its model: the model directory exists and its
// config parses, every prompt id is inside the vocabulary, and text prompts are tokenized
// with the model's tokenizer (a clear error when the model has none). Run by `submit`, so a
// job that cannot run is rejected before anything is stored.
#pragma once

#include "engine/model/config.h"
#include "engine/util/status.h"
#include "jobs/job_spec.h"

namespace nj::jobs {

// Validates `spec` against its model and fills the prompt ids of text prompts.
// Returns InvalidArgument listing every problem as "<spec>:<line>:<col>: <key>: <what>".
// Reads config.json only (not the weights).
Status bind_spec_to_model(JobSpec& spec);

// The same checks against an already loaded config (no tokenizer: text prompts are errors).
Status check_spec_against_config(JobSpec& spec, const ModelConfig& config);

}  // namespace nj::jobs
