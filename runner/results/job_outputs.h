// A job's results as files: the CSV form of `nightjar results --format csv`, and the
// outputs a classify spec declares (`outputs: {jsonl, csv}`) or an OpenAI batch job asked for
// (`submit --openai-batch IN --output-file OUT [--error-file ERR]`), written atomically when
// the job's last item finishes (by `run`) and again by `nightjar results JOB --write`.
//
// CSV (RFC 4180: comma-separated, fields with a comma, quote or line break quoted, quotes
// doubled; one header line; items in spec order):
//   classify   custom_id,status,label,p(<label 1>),...,p(<label n>),margin,error
//   generate   custom_id,status,finish_reason,output_tokens,output_text,error
// Items without a result leave label, probabilities and margin empty.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "runner/store/home.h"
#include "runner/store/job_store.h"

namespace nj::runner {

// The job's results as JSON Lines, one object per item (cmd_results.cpp: the same text as
// `nightjar results JOB`).
Result<std::string> results_jsonl(JobStore& store, const JobRow& job);

// The prompt tokens every item of the job shares besides its own: a classification's
// template prefix (prefilled once per job), else 0. An item's `prompt_tokens` (results,
// status, the OpenAI lines) is its own prompt_ids plus these: every token its answer was
// conditioned on (cmd_results.cpp).
int64_t shared_prompt_tokens(const JobRow& job);

// The job's results as CSV (above).
Result<std::string> results_csv(JobStore& store, const JobRow& job);

// Result records (result_record.h, in order) of a job of `kind` with the stored settings
// `settings_json` as CSV (above). InvalidArgument when a classify job's settings do not parse.
Result<std::string> records_csv(const std::string& kind, const std::string& settings_json,
                                const std::vector<nlohmann::json>& records);

// Writes the outputs the job's spec declared, or its OpenAI output and error files
// (jobs::OpenAiOutputs) (durably: temp + fsync + rename), each checked
// again right before its write against the output-path policy it was submitted under
// (jobs/output_paths.h), with `home` as a home too. Returns the paths written; empty when
// the job declares none. InvalidArgument naming the key and the resolved path when the
// policy now refuses one (nothing of it written); IOError naming the path.
Result<std::vector<std::string>> write_declared_outputs(JobStore& store, const JobRow& job,
                                                        const Home& home);

// Whether the job declares outputs (a classify job's `outputs:`, an OpenAI batch's
// --output-file). False when its settings do not parse (write_declared_outputs then reports why).
bool declares_outputs(const JobRow& job);

// One CSV field, quoted when needed; invalid UTF-8 replaced by U+FFFD as in the JSON forms.
std::string csv_field(const std::string& text);

}  // namespace nj::runner
