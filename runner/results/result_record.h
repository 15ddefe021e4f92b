// One item's result as a JSON object: a line of `nightjar results JOB` (JSON Lines), of an
// array task's results file (DIR/results/task-I.jsonl) and of `nightjar merge`. CSV and
// OpenAI Batch output are written from these records (job_outputs.h, openai_results.h), so
// a merged array and a single home give the same files.
//
//   record := {"custom_id": TEXT,
//              "status": "queued" | "running" | "done" | "failed" | "cancelled",
//              "error": TEXT | null,              (the last error; null when done)
//              "prompt_tokens": N,                (every token the answer is conditioned on;
//                                                  a classification's template prefix too)
//              "attempts": N,
//              "output_ids": [N...] | null,       (null unless done)
//              "output_text": TEXT,               (done items of a model with a tokenizer)
//              "output_tokens": N,                (tokens generated so far)
//              "finish_reason": TEXT | null,      ("length", "stop", "label"; null unless done)
//              "details": {...},                  (classification: label, probabilities,
//                                                  margin, decode_steps, ...)
//              "timings": {"prefill_s", "decode_s", "started_at", "finished_at", "wall_s"},
//              "engine": {"io_wait_s", "compute_s", "bytes_read", "tokens_fed",
//                         "decode_steps", "numerics_version"}}
//                                                 (numerics_version: engine/ops/numerics.h
//                                                  of the stored output; null: unrecorded)
//
// The *answer* of a record is everything but attempts, timings and engine: the same for
// every run of the item, whatever the machine, budget or interruptions (merge compares it).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "runner/store/job_store.h"

namespace nj::runner {

// The record of `item` (with its result `r` when done). `shared_prompt_tokens`: the job's
// prompt tokens before each item's own (shared_prompt_tokens(job), job_outputs.h), counted
// in an unfinished item's prompt_tokens as a done item's result counts them.
nlohmann::json result_record(const ItemRow& item, const std::optional<ResultRow>& r,
                             int64_t shared_prompt_tokens);

// The record without attempts, timings and engine usage (above).
nlohmann::json record_answer(const nlohmann::json& record);

// The record's "error" as text ("" for null).
std::string record_error(const nlohmann::json& record);

}  // namespace nj::runner
