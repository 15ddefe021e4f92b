// `nightjar results JOB --format openai`: one OpenAI Batch API output line per item, so
// tools written for the Batch API read a night's results unchanged. The contract is
// schemas/openai_batch_output.schema.json; a line is one of:
//
//   done:  {"id": "batch_req_<job>_<item>", "custom_id": TEXT,
//           "response": {"status_code": 200, "request_id": "nj-<job>_<item>",
//                        "body": {"id": "chatcmpl-nj-<job>_<item>",
//                                 "object": "chat.completion",
//                                 "created": UNIX_SECONDS,          (when the item finished)
//                                 "model": TEXT,                    (the model directory's name)
//                                 "choices": [{"index": 0,
//                                              "message": {"role": "assistant",
//                                                          "content": TEXT | null},
//                                              "finish_reason": "stop" | "length"}],
//                                 "usage": {"prompt_tokens": N, "completion_tokens": N,
//                                           "total_tokens": N}}},
//           "error": null}
//   other: {"id": ..., "custom_id": TEXT, "response": null,
//           "error": {"code": "item_failed" | "item_cancelled" | "not_finished",
//                     "message": TEXT}}
//
// `content` is the output text without the closing end-of-sequence token (null when the
// model has no tokenizer); `completion_tokens` counts every generated token, that one too.
// A classification's line carries its label as `content` (exactly `output_text` of the JSON
// Lines results), `finish_reason` "stop", `completion_tokens` the label's tokens and
// `prompt_tokens` every token the answer was conditioned on (template prefix, document,
// suffix), as the JSON Lines results count them.
// `<job>` and `<item>` are the store's ids, so ids are unique within a home.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "runner/store/job_store.h"

namespace nj::runner {

// The output line of `item` (its result `r` when done). `tok` (may be null) decodes the
// content without the end-of-sequence token; without it the stored output text is used.
nlohmann::json openai_batch_line(const JobRow& job, const ItemRow& item,
                                 const std::optional<ResultRow>& r, const Tokenizer* tok);

// Every item's line, in spec order, newline-terminated. Loads the job's tokenizer when its
// model has one (and uses the stored output text when it cannot be read). Store errors.
Result<std::string> openai_batch_text(JobStore& store, const JobRow& job,
                                      const std::vector<ItemRow>& items);

}  // namespace nj::runner
