// Job spec files: YAML text -> a validated JobSpec, every error with file:line:column.
//
// The format (kind `generate`; kind `classify` is in classify_spec.h):
//
//   name: TEXT                 required
//   model: DIR                 required; a relative path resolves against the spec's directory
//   kind: generate             required: generate or classify
//   memory: SIZE               optional engine memory budget ("8GiB", "512MiB", bytes)
//   max_attempts: N            optional, default 3: failed attempts (errors, lost processes)
//                              after which an item fails with its last error
//   priority: N                optional, default 0; higher first, FIFO among equals
//   speculative: MODE          optional, generate only: how `run` decodes the items
//                              (engine/speculative/; the tokens are the same in every mode):
//                              ngram   prompt-lookup drafts verified in the same pass,
//                                      as many per pass as the budget holds (up to 8,
//                                      adapting to each item's acceptance)
//                              auto    (default) ngram when the planner says it pays at
//                                      the job's budget (the weights stream and one draft
//                                      breaks even below 50 % acceptance), else off
//                              off     one token per item per pass
//   defaults:                  optional per-item settings (each key also allowed per item)
//     max_tokens: N            tokens to generate, 1..1048576, default 64
//     temperature: X           0 = greedy (default); > 0 samples
//     top_k: N                 0 = no limit (default)
//     top_p: X                 in (0, 1], 1 = no limit (default)
//     seed: N                  RNG seed (unsigned 64-bit), default 0
//     ignore_eos: BOOL         keep generating past the end-of-sequence token (default false:
//                              stop there, when the model has a tokenizer)
//   items:                     required, at least one
//     - id: TEXT               required, unique within the job (the result's custom_id)
//       prompt: TEXT           the prompt as text, at most 16 MiB (tokenized at submit with
//                              the model's tokenizer; an error when the model has none), or
//       prompt_ids: [N, ...]   the prompt as token ids (exactly one of the two)
//       max_tokens: N          any `defaults` key overrides the default for this item
//
// Unknown keys and duplicate keys are errors; all errors of a file are reported together.
// A job whose context exceeds the model's maximum, or whose `memory` is below what it needs,
// is refused by the model checks (spec_model.h).
// Checks that need the model (its existence, vocabulary, tokenizer) are in spec_model.h.
#pragma once

#include <string>

#include "engine/util/status.h"
#include "jobs/spec/job_spec.h"

namespace nj::jobs {

// Parses spec text. `name` prefixes messages (normally the file path); `base_dir` is the
// directory relative model paths resolve against.
// Returns InvalidArgument listing every error as "<name>:<line>:<col>: <key>: <what>".
Result<JobSpec> parse_job_spec(const std::string& text, const std::string& name,
                               const std::string& base_dir);

// Reads and parses a spec file (relative paths resolve against its directory). NotFound /
// IOError naming the path when it cannot be read; parse errors as above.
Result<JobSpec> load_job_spec(const std::string& path);

}  // namespace nj::jobs
