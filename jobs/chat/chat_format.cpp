// K3's chat format: messages rendered as XTML elements (grammar in chat_format.h).
#include "jobs/chat/chat_format.h"

#include <utility>

namespace nj::jobs {
namespace {

constexpr const char* kEndOfMsg = "<|end_of_msg|>";
constexpr const char* kOpen = "<|open|>";
constexpr const char* kClose = "<|close|>";
constexpr const char* kSep = "<|sep|>";

// Appends control tokens and text runs to a prompt, keeping its text and ids in step.
class PromptWriter {
 public:
  PromptWriter(const Tokenizer& tok, const ChatControls& c) : tok_(tok), c_(c) {}

  void control(int32_t id) {
    out_.ids.push_back(id);
    out_.text += *tok_.token_bytes(id);
  }
  void text(std::string_view t) {
    const std::vector<int32_t> ids = tok_.encode(t);
    out_.ids.insert(out_.ids.end(), ids.begin(), ids.end());
    out_.text += t;
  }
  // OPEN TAG SEP, TAG holding the element's name and attributes.
  void open(std::string_view tag) {
    control(c_.open);
    text(tag);
    control(c_.sep);
  }
  // CLOSE NAME SEP
  void close(std::string_view name) {
    control(c_.close);
    text(name);
    control(c_.sep);
  }
  // A whole element: OPEN TAG SEP BODY CLOSE NAME SEP.
  void element(std::string_view tag, std::string_view name, std::string_view body) {
    open(tag);
    text(body);
    close(name);
  }
  RenderedPrompt take() { return std::move(out_); }

 private:
  const Tokenizer& tok_;
  const ChatControls& c_;
  RenderedPrompt out_;
};

std::string message_tag(ChatRole role) {
  return std::string("message role=\"") + escape_attribute_value(chat_role_name(role)) + "\"";
}

}  // namespace

const char* chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem:
      return "system";
    case ChatRole::kUser:
      return "user";
    case ChatRole::kAssistant:
      return "assistant";
  }
  return "?";
}

std::optional<ChatRole> parse_chat_role(std::string_view name) {
  if (name == "system" || name == "developer") return ChatRole::kSystem;
  if (name == "user") return ChatRole::kUser;
  if (name == "assistant") return ChatRole::kAssistant;
  return std::nullopt;
}

const char* thinking_effort_name(ThinkingEffort effort) {
  switch (effort) {
    case ThinkingEffort::kLow:
      return "low";
    case ThinkingEffort::kMedium:
      return "medium";
    case ThinkingEffort::kHigh:
      return "high";
    case ThinkingEffort::kMax:
      return "max";
  }
  return "?";
}

std::optional<ThinkingEffort> parse_thinking_effort(std::string_view name) {
  for (ThinkingEffort e :
       {ThinkingEffort::kLow, ThinkingEffort::kMedium, ThinkingEffort::kHigh, ThinkingEffort::kMax})
    if (name == thinking_effort_name(e)) return e;
  return std::nullopt;
}

std::string thinking_effort_body(ThinkingEffort effort) {
  return std::string(
             "`thinking_effort` guides on how much to think in your thinking channel (not "
             "including the response channel), supported values include `low`, `medium`, "
             "`high`, and `max`.\nNow the system is invoked with `thinking_effort=") +
         thinking_effort_name(effort) + "`.";
}

Result<ChatControls> chat_controls(const Tokenizer& tok) {
  ChatControls c;
  std::string missing;
  auto find = [&](const char* name, int32_t& id) {
    if (auto found = tok.special_id(name))
      id = *found;
    else
      missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  find(kEndOfMsg, c.end_of_msg);
  find(kOpen, c.open);
  find(kClose, c.close);
  find(kSep, c.sep);
  if (!missing.empty())
    return invalid_argument("the tokenizer has no chat control tokens (" + missing +
                            "): chat messages need K3's chat format (k3-model.md 9.1)");
  return c;
}

std::string escape_attribute_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char ch : value) {
    if (ch == '&')
      out += "&amp;";
    else if (ch == '"')
      out += "&quot;";
    else
      out += ch;
  }
  return out;
}

RenderedPrompt render_chat(const Tokenizer& tok, const ChatControls& controls,
                           std::span<const ChatMessage> messages, const ChatOptions& options) {
  PromptWriter w(tok, controls);
  if (options.thinking) {
    w.element(message_tag(ChatRole::kSystem) + " type=\"" +
                  escape_attribute_value("thinking-effort") + "\"",
              "message", thinking_effort_body(options.effort));
    w.control(controls.end_of_msg);
  }
  for (const ChatMessage& m : messages) {
    w.open(message_tag(m.role));
    if (m.role == ChatRole::kAssistant) {
      if (options.thinking) w.element("think", "think", m.reasoning);
      w.element("response", "response", m.content);
    } else {
      w.text(m.content);
    }
    w.close("message");
    w.control(controls.end_of_msg);
  }
  w.open(message_tag(ChatRole::kAssistant));
  w.open(options.thinking ? "think" : "response");
  return w.take();
}

}  // namespace nj::jobs
