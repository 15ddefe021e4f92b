// K3's chat format (k3-model.md §9): chat messages -> the prompt's token ids.
//
// k3-model.md says only that turns are wrapped in <|open|>/<|sep|>/<|close|>; the layout
// below (role between open and sep, content between sep and close) is our reading of it,
// and the one place to change should the released chat template differ.
// Each turn is wrapped in the tokenizer's chat specials, and the prompt ends by opening the
// assistant's turn, so the model's answer is the assistant content and its end-of-sequence
// token (`<|close|>` for K3) closes the turn:
//
//   prompt = turn+ "<|open|>" "assistant" "<|sep|>"
//   turn   = "<|open|>" ROLE "<|sep|>" CONTENT "<|close|>"
//
// The three specials are special ids; ROLE and CONTENT are user text, encoded with special
// recognition off (a "<|close|>" typed in a message is plain text and never ends a turn).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/status.h"

namespace nj::jobs {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // plain text
};

// The roles the format accepts.
bool is_chat_role(const std::string& role);

// OK when `tok` has the three chat specials; otherwise InvalidArgument naming the missing
// ones (a base tokenizer without the chat format).
Status check_chat_specials(const Tokenizer& tok);

// The prompt ids of `messages` in the format above.
// REQUIRES: check_chat_specials(tok).ok(); every role is_chat_role.
std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages);

}  // namespace nj::jobs
