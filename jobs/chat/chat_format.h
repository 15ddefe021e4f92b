// K3's chat format, "XTML" (k3-model.md §9.1): chat messages -> the prompt's text and ids.
//
// The release's encoding_k3.py builds a prompt as XML-like elements whose brackets are four
// control tokens, each a single special id looked up by name in the tokenizer:
//
//   EOM   "<|end_of_msg|>"  ends a message; the eos: generation stops there
//   OPEN  "<|open|>"        opens an element:  OPEN TAG ATTRS SEP
//   CLOSE "<|close|>"       closes one:        CLOSE TAG SEP
//   SEP   "<|sep|>"         ends an open or a close tag
//
// The prompt (no BOS; quoted text and the capitals below are ordinary text tokens):
//
//   prompt     = [effort] message* generation
//   effort     = OPEN 'message role="system" type="thinking-effort"' SEP EFFORT
//                CLOSE "message" SEP EOM                                    thinking on only
//   message    = OPEN 'message role="' ROLE '"' SEP body CLOSE "message" SEP EOM
//   body       = CONTENT                                                    system, user
//              | [think] OPEN "response" SEP CONTENT CLOSE "response" SEP   assistant
//   think      = OPEN "think" SEP REASONING CLOSE "think" SEP    thinking on, even if empty
//   generation = OPEN 'message role="assistant"' SEP OPEN "response" SEP    thinking off
//              | OPEN 'message role="assistant"' SEP OPEN "think" SEP       thinking on
//
//   ROLE   = "system" | "user" | "assistant"     (the API's "developer" reads as system)
//   EFFORT = the two lines of kThinkingEffortBody with LEVEL = low | medium | high | max
//
// Attribute values escape '&' as "&amp;" and '"' as "&quot;". CONTENT and REASONING are the
// user's text, encoded with special-token recognition off: a "<|close|>" typed in a message
// is text and never closes anything. Each text run between two control tokens is encoded
// on its own, as tiktoken does when it splits a prompt at its special tokens.
//
// What the model writes back, and how it is read, is in chat_reply.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/status.h"

namespace nj::jobs {

enum class ChatRole { kSystem, kUser, kAssistant };
const char* chat_role_name(ChatRole role);
// "system", "developer" (as system), "user", "assistant"; nullopt for anything else.
std::optional<ChatRole> parse_chat_role(std::string_view name);

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;    // plain text
  std::string reasoning;  // assistant only: its think channel, rendered when thinking is on
};

// How much the model is asked to think; the release's default is kMax.
enum class ThinkingEffort { kLow, kMedium, kHigh, kMax };
const char* thinking_effort_name(ThinkingEffort effort);
// "low", "medium", "high", "max"; nullopt for anything else.
std::optional<ThinkingEffort> parse_thinking_effort(std::string_view name);

struct ChatOptions {
  // Off by default: at this engine's speed a reasoning trace costs hours per request.
  bool thinking = false;
  ThinkingEffort effort = ThinkingEffort::kMax;  // used when thinking; the release's default
};

// The body of the thinking-effort system message, exactly as §9.1 gives it (two lines, no
// newline at the end), for `effort`.
std::string thinking_effort_body(ThinkingEffort effort);

// The four control tokens' ids.
struct ChatControls {
  int32_t end_of_msg = -1;
  int32_t open = -1;
  int32_t close = -1;
  int32_t sep = -1;
  bool is_control(int32_t id) const {
    return id == end_of_msg || id == open || id == close || id == sep;
  }
};

// The control tokens of `tok`, by name. InvalidArgument naming the missing ones when the
// tokenizer lacks the chat format (a base model's tokenizer).
Result<ChatControls> chat_controls(const Tokenizer& tok);

// `value` as an attribute value: '&' -> "&amp;", '"' -> "&quot;", everything else as is.
std::string escape_attribute_value(std::string_view value);

struct RenderedPrompt {
  std::string text;          // control tokens written as their names
  std::vector<int32_t> ids;  // what the model is fed
};

// The prompt of `messages`: every message as an element, then the generation prompt.
// REQUIRES: `controls` == chat_controls(tok).
RenderedPrompt render_chat(const Tokenizer& tok, const ChatControls& controls,
                           std::span<const ChatMessage> messages, const ChatOptions& options);

}  // namespace nj::jobs
