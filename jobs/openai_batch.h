// OpenAI Batch API input files (JSON Lines) -> a generate JobSpec, for
// `nightjar submit --openai-batch FILE.jsonl --model DIR`.
//
// One request per line (blank lines are skipped):
//
//   {"custom_id": TEXT,                  required, non-empty, unique in the file
//    "method": "POST",                   optional; POST when given
//    "url": "/v1/chat/completions",      optional; this endpoint when given
//    "body": {                           required
//      "messages": [{"role": R, "content": C}, ...],   required, non-empty;
//                                        R = system | user | assistant (developer reads
//                                        as system); C = text, or a list of
//                                        {"type": "text", "text": TEXT} parts (joined);
//                                        all messages' text at most 16 MiB
//      "model": TEXT,                    optional, ignored (the job runs --model DIR)
//      "max_tokens": N,                  optional, 1..1048576, default 64;
//      "max_completion_tokens": N,       ... the same, under its newer name (not both)
//      "temperature": X,                 optional, >= 0 (0 = greedy, the default)
//      "top_p": X,                       optional, in (0, 1]
//      "seed": N,                        optional, unsigned 64-bit, default 0
//      "n": 1}}                          optional; only 1
//
// A null value counts as absent. Any other key of a request, its body or a message is an
// error (an option silently ignored would change the answers). Messages render with K3's
// chat format (jobs/chat_format.h), which needs the model's tokenizer and its chat specials.
// Every error names the file and the line ("<file>:<line>: custom_id: missing"), all of a
// file's errors are reported together, and a rejected file yields no job.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/util/status.h"
#include "jobs/chat_format.h"
#include "jobs/job_spec.h"

namespace nj::jobs {

struct OpenAiRequest {
  int line = 0;  // 1-based line in the file
  std::string custom_id;
  std::vector<ChatMessage> messages;
  GenerateParams params;
};

// Parses the file's text; `name` prefixes messages. InvalidArgument listing every error as
// "<name>:<line>: <what>" (at most 20), or an error when the file holds no request.
Result<std::vector<OpenAiRequest>> parse_openai_batch(const std::string& text,
                                                      const std::string& name);

struct OpenAiBatchJob {
  std::string path;                      // the input file
  std::string model_dir;                 // --model
  std::string name;                      // --name; empty = the file's name without .jsonl
  std::optional<uint64_t> memory_bytes;  // --memory
};

// Reads and parses the file, then renders every request's messages with the model's
// tokenizer into a generate job (items in file order, id = custom_id) whose prompts are
// token ids. Reads config.json and the tokenizer, never the weights. NotFound / IOError
// naming the path when it cannot be read; InvalidArgument for a bad file, a missing model,
// or a model without a tokenizer or chat specials.
Result<JobSpec> load_openai_batch(const OpenAiBatchJob& job);

}  // namespace nj::jobs
