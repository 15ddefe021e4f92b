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
//                                                          "content": TEXT | null,
//                                                          "reasoning_content": TEXT},
//                                              "logprobs": null | {"content": [TOKEN, ...]},
//                                              "finish_reason": "stop" | "length"}],
//                                 "usage": {"prompt_tokens": N, "completion_tokens": N,
//                                           "total_tokens": N}}},
//           "error": null}
//   other: {"id": ..., "custom_id": TEXT, "response": null,
//           "error": {"code": "item_failed" | "item_cancelled" | "not_finished",
//                     "message": TEXT}}
//
//   TOKEN = {"token": TEXT, "logprob": X, "bytes": [BYTE, ...],
//            "top_logprobs": [{"token": TEXT, "logprob": X, "bytes": [BYTE, ...]}, ...]}
//
// For a chat item (an OpenAI request) the message is its reply read into channels
// (jobs/chat/chat_reply.h): `content` is the response channel's text (null when the reply
// was cut off before it, e.g. inside the think channel) and `reasoning_content`, present only
// when thinking was on, the think channel's; the envelope's tokens never reach either.
// finish_reason is "stop" at the end of the message or at a stop string (whose text is
// left out) and "length" at max_tokens. For other items `content` is the output text without
// the closing end-of-sequence token (null when the model has no tokenizer).
// `logprobs` is null unless the request asked for it; then it has one TOKEN per generated
// token (completion_tokens of them, the envelope's too, in order): the token's text
// (its bytes; a control token's name), its log-probability under the model's logits and the
// top_logprobs most likely tokens'. `completion_tokens` counts every generated token.
// A classification's line carries its label as `content` (exactly `output_text` of the JSON
// Lines results), `finish_reason` "stop", `completion_tokens` the label's tokens and
// `prompt_tokens` every token the answer was conditioned on (template prefix, document,
// suffix), as the JSON Lines results count them.
// `<job>` and `<item>` are the store's ids, so ids are unique within a home.
// Lines written from result records (`nightjar merge --format openai`, several homes) use
// `<job>_<item>` = "array_<N>", N the item's 0-based place in the job's spec, unique within
// the array; there `created` is the item's finished_at, `prompt_tokens` the record's (the same
// count, template prefix included), `content` the plain output text (a record does not say how a
// chat reply splits; a classification's is its label) and `logprobs` null.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "runner/store/job_store.h"

namespace nj::runner {

// What a done item's line is made of besides its rows.
struct OpenAiLineInputs {
  // Decodes the content (may be null: the stored output text is used for plain items).
  const Tokenizer* tok = nullptr;
  // The item's stored per-token log-probabilities, when it asked for them.
  const std::vector<TokenLogprobs>* logprobs = nullptr;
};

// The output line of `item` (its result `r` when done). InvalidArgument when the item is a
// chat reply or asked for log-probabilities and `in` lacks the tokenizer or the
// log-probabilities it needs, or when its stored parameters do not parse.
Result<nlohmann::json> openai_batch_line(const JobRow& job, const ItemRow& item,
                                         const std::optional<ResultRow>& r,
                                         const OpenAiLineInputs& in);

// The output line of a result record (result_record.h) under the key `key` ("<job>_<item>"
// above) for a model directory named `model_name`; `tok` as above.
nlohmann::json openai_batch_line(const nlohmann::json& record, const std::string& key,
                                 const std::string& model_name, const Tokenizer* tok);

// Every item's line, in spec order, newline-terminated. Loads the job's tokenizer when its
// model has one (plain items use the stored output text when it cannot be read; chat items
// then fail, naming the tokenizer's error). Store errors.
Result<std::string> openai_batch_text(JobStore& store, const JobRow& job,
                                      const std::vector<ItemRow>& items);

// The Batch API's two files: `output` holds the lines with a response and `errors` those
// without (failed, cancelled, unfinished), each in spec order, as OpenAI splits a batch's
// results (`submit --openai-batch IN --output-file OUT --error-file ERR`).
struct OpenAiBatchFiles {
  std::string output, errors;
};
Result<OpenAiBatchFiles> openai_batch_files(JobStore& store, const JobRow& job,
                                            const std::vector<ItemRow>& items);

}  // namespace nj::runner
