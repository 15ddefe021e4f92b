// OpenAI-style chat messages and chat files (format in chat_messages.h).
#include "jobs/chat/chat_messages.h"

#include <optional>

#include "engine/io/file.h"

namespace nj::jobs {
namespace {

using nlohmann::json;

constexpr size_t kMaxChatFileBytes = 64u << 20;

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// Message content: a string, or text parts joined.
std::optional<std::string> read_content(const json& c, const std::string& path,
                                        std::vector<std::string>& errors) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) {
    errors.push_back(path + ": expected text or a list of {\"type\": \"text\", \"text\": ...}");
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      errors.push_back(path + "[" + std::to_string(i) +
                       "]: only {\"type\": \"text\", \"text\": TEXT} parts are supported");
      return std::nullopt;
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::optional<ChatMessage> read_message(const json& m, const std::string& path,
                                        std::vector<std::string>& errors) {
  if (!m.is_object()) {
    errors.push_back(path + ": expected {\"role\": ..., \"content\": ...}");
    return std::nullopt;
  }
  for (const auto& [key, value] : m.items())
    if (key != "role" && key != "content" && key != "reasoning_content")
      errors.push_back(path + "." + key +
                       ": unsupported field (supported: content, reasoning_content, role)");
  const json* role = field(m, "role");
  if (!role || !role->is_string()) {
    errors.push_back(path + ".role: missing or not text");
    return std::nullopt;
  }
  const std::optional<ChatRole> r = parse_chat_role(role->get<std::string>());
  if (!r) {
    errors.push_back(path + ".role: unsupported role '" + role->get<std::string>() +
                     "' (supported: system, developer, user, assistant)");
    return std::nullopt;
  }
  ChatMessage out;
  out.role = *r;
  const json* content = field(m, "content");
  if (!content) {
    errors.push_back(path + ".content: missing");
    return std::nullopt;
  }
  std::optional<std::string> text = read_content(*content, path + ".content", errors);
  if (!text) return std::nullopt;
  out.content = std::move(*text);
  if (const json* reasoning = field(m, "reasoning_content")) {
    if (out.role != ChatRole::kAssistant) {
      errors.push_back(path + ".reasoning_content: only assistant messages have reasoning");
      return std::nullopt;
    }
    if (!reasoning->is_string()) {
      errors.push_back(path + ".reasoning_content: expected text");
      return std::nullopt;
    }
    out.reasoning = reasoning->get<std::string>();
  }
  return out;
}

}  // namespace

std::vector<ChatMessage> read_chat_messages(const json& messages, const std::string& path,
                                            std::vector<std::string>& errors) {
  std::vector<ChatMessage> out;
  if (!messages.is_array() || messages.empty()) {
    errors.push_back(path + ": expected a non-empty list of {role, content}");
    return out;
  }
  for (size_t i = 0; i < messages.size(); ++i)
    if (auto m = read_message(messages[i], path + "[" + std::to_string(i) + "]", errors))
      out.push_back(std::move(*m));
  return out;
}

Result<std::vector<ChatMessage>> load_chat_file(const std::string& path) {
  NJ_ASSIGN_OR_RETURN(std::string text, read_small_file(path, kMaxChatFileBytes));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return invalid_argument(path + ": malformed JSON: " + e.what());
  }
  if (!j.is_object()) return invalid_argument(path + ": expected {\"messages\": [...]}");
  std::vector<std::string> errors;
  for (const auto& [key, value] : j.items())
    if (key != "messages")
      errors.push_back(key + ": unsupported field (a chat file holds only \"messages\")");
  const json* messages = field(j, "messages");
  std::vector<ChatMessage> out;
  if (!messages)
    errors.push_back("messages: missing");
  else
    out = read_chat_messages(*messages, "messages", errors);
  if (errors.empty()) return out;
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + path + ": " + e;
  return invalid_argument(all);
}

Result<RenderedPrompt> render_chat_file(const Tokenizer& tok, const std::string& path,
                                        const ChatOptions& options) {
  NJ_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages, load_chat_file(path));
  NJ_ASSIGN_OR_RETURN(ChatControls controls, chat_controls(tok));
  return render_chat(tok, controls, messages, options);
}

}  // namespace nj::jobs
