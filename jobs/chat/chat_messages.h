// OpenAI-style chat messages (JSON) -> ChatMessage, for OpenAI batch requests and for
// `nightjar tokenize|generate --chat-file F.json`.
//
//   messages = [message, ...]                              non-empty
//   message  = {"role": R,                                 system | developer | user | assistant
//               "content": C,                              text, or a list of
//                                                          {"type": "text", "text": TEXT} parts
//                                                          (joined)
//               "reasoning_content": TEXT | null}          assistant only, optional: its think
//                                                          channel (rendered with thinking on)
//   chat file = {"messages": messages}                     the body of a chat request; no
//                                                          other key
//
// A null value counts as absent. Any other key of a message is an error: an option silently
// ignored would change the prompt. Every error names where it is
// ("body.messages[1].role: ...", "chat.json: messages[0].content: missing").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "jobs/chat/chat_format.h"

namespace nj::jobs {

// The messages of `messages` (a JSON value; `path` names it in errors, e.g.
// "body.messages"). Each problem is appended to `errors` as "<path>...: <what>"; the
// result then lacks the bad messages.
std::vector<ChatMessage> read_chat_messages(const nlohmann::json& messages, const std::string& path,
                                            std::vector<std::string>& errors);

// Reads a chat file (grammar above). NotFound / IOError naming the path when it cannot be
// read; InvalidArgument listing every problem, each prefixed with the path.
Result<std::vector<ChatMessage>> load_chat_file(const std::string& path);

// The prompt of the chat file at `path` under `tok` (load_chat_file, then render_chat).
// Errors of load_chat_file, and InvalidArgument when the tokenizer lacks the chat format's
// control tokens.
Result<RenderedPrompt> render_chat_file(const Tokenizer& tok, const std::string& path,
                                        const ChatOptions& options);

}  // namespace nj::jobs
