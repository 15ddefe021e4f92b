// OpenAI Batch API input files (JSON Lines) -> a generate JobSpec, for
// `nightjar submit --openai-batch FILE.jsonl --model DIR`.
//
// One request per line (blank lines are skipped):
//
//   {"custom_id": TEXT,                  required, non-empty, unique in the file
//    "method": "POST",                   optional; POST when given
//    "url": "/v1/chat/completions",      optional; this endpoint when given
//    "body": {                           required
//      "messages": [...],                required: jobs/chat/chat_messages.h (roles system,
//                                        developer = system, user, assistant; text content;
//                                        an assistant's reasoning_content); all messages'
//                                        text at most 16 MiB
//      "model": TEXT,                    optional, ignored (the job runs --model DIR)
//      "max_tokens": N,                  optional, 1..1048576; absent: up to the model's
//                                        context (its maximum less the prompt), at most the
//                                        job's default (submit --max-tokens, 4096)
//      "max_completion_tokens": N,       ... the same, under its newer name (not both)
//      "temperature": X,                 optional, >= 0 (0 = greedy); absent: 1, as OpenAI's
//      "top_p": X,                       optional, in (0, 1]; absent: 1
//      "seed": N,                        optional, unsigned 64-bit; absent: derived from the
//                                        job's name and the custom_id (derived_seed), so a
//                                        sampled reply is the same in every home and run
//      "n": 1,                           optional; only 1
//      "user": TEXT, "metadata": {...},  optional, accepted and recorded (no effect)
//      "presence_penalty": 0,            optional; only 0 (recorded; a penalty would change
//      "frequency_penalty": 0,             the output, so any other value is an error)
//      "response_format": {"type": "text"},  optional; only text (recorded)
//      "stream": false,                  optional; only false (recorded)
//      "logit_bias": {},                 optional; only empty (recorded)
//      "reasoning_effort": E,            optional: thinking on, at effort E = low | medium |
//                                        high (the same word in K3's effort message)
//      "chat_template_kwargs": {         optional, as vLLM accepts it:
//        "thinking": BOOL,                 thinking on or off (default off)
//        "thinking_effort": E},            low | medium | high | max (default max); only
//                                          with "thinking": true
//      "stop": TEXT | [TEXT, ...],       optional, 1 to 4 non-empty strings, matched on the
//                                        reply's text (jobs/chat/chat_reply.h)
//      "logprobs": BOOL,                 optional, default false: per generated token, its
//                                        log-probability under the model's logits
//      "top_logprobs": N}}               optional, 0..20, and the N most likely tokens'
//                                        (needs "logprobs": true)
//
// Thinking is off unless a request turns it on: at this engine's speed a reasoning trace
// costs hours. reasoning_effort and chat_template_kwargs may both be given when they agree.
// A null value counts as absent. The fields accepted without effect are kept with the item
// (its stored parameters' "accepted_fields"). Any other key of a request, its body or a
// message is an error (an option silently ignored would change the answers). Messages render with
// K3's chat format (jobs/chat/chat_format.h), which needs the model's tokenizer and its control
// tokens. Every error names the file and the line ("<file>:<line>: custom_id: missing"), all
// of a file's errors are reported together, and a rejected file yields no job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "jobs/chat/chat_format.h"
#include "jobs/spec/job_spec.h"

namespace nj::jobs {

// A request's output limit when it gives none (OpenAI: the model's context): at most this
// many tokens, or `submit --max-tokens N`. It bounds the state each sequence reserves.
inline constexpr int kDefaultOpenAiMaxTokens = 4096;
// A request's temperature when it gives none: OpenAI's default.
inline constexpr float kDefaultOpenAiTemperature = 1.0f;

struct OpenAiRequest {
  int line = 0;  // 1-based line in the file
  std::string custom_id;
  std::vector<ChatMessage> messages;
  ChatOptions chat;       // thinking and its effort (how the prompt is rendered)
  GenerateParams params;  // params.chat: how the reply is read (thinking, stop strings)
  bool max_tokens_given = false;  // else the job's default, within the model's context
  bool seed_given = false;        // else derived_seed(job name, custom_id)
  nlohmann::json accepted_fields = nlohmann::json::object();  // the no-op fields, as given
};

// The seed of a request without one: XXH64 (seed 0) of the job's name, a NUL byte and the
// custom_id. The same request in the same-named job samples the same tokens in any home.
uint64_t derived_seed(const std::string& job_name, const std::string& custom_id);

// Parses the file's text; `name` prefixes messages. InvalidArgument listing every error as
// "<name>:<line>: <what>" (at most 20), or an error when the file holds no request.
Result<std::vector<OpenAiRequest>> parse_openai_batch(const std::string& text,
                                                      const std::string& name);

struct OpenAiBatchJob {
  std::string path;                      // the input file
  std::string model_dir;                 // --model
  std::string name;                      // --name; empty = the file's name without .jsonl
  std::optional<uint64_t> memory_bytes;  // --memory
  int default_max_tokens = kDefaultOpenAiMaxTokens;  // --max-tokens
};

// Reads and parses the file, then renders every request's messages with the model's
// tokenizer into a generate job (items in file order, id = custom_id) whose prompts are
// token ids. Reads config.json and the tokenizer, never the weights. NotFound / IOError
// naming the path when it cannot be read; InvalidArgument for a bad file, a missing model,
// or a model without a tokenizer or the chat format's control tokens.
Result<JobSpec> load_openai_batch(const OpenAiBatchJob& job);

}  // namespace nj::jobs
