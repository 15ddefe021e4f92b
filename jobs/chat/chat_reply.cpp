// Reading a chat reply into its channels (the rules are in chat_reply.h).
#include "jobs/chat/chat_reply.h"

#include <algorithm>

namespace nj::jobs {

nlohmann::json chat_reply_to_json(const ChatReplyOptions& o) {
  nlohmann::json j = {{"thinking", o.thinking}};
  if (!o.stop.empty()) j["stop"] = o.stop;
  return j;
}

Result<ChatReplyOptions> chat_reply_from_json(const nlohmann::json& j) {
  ChatReplyOptions o;
  if (!j.is_object()) return invalid_argument("item parameters: 'chat' is not an object");
  auto thinking = j.find("thinking");
  if (thinking == j.end() || !thinking->is_boolean())
    return invalid_argument("item parameters: 'chat.thinking' missing or not true or false");
  o.thinking = thinking->get<bool>();
  if (auto stop = j.find("stop"); stop != j.end()) {
    if (!stop->is_array())
      return invalid_argument("item parameters: 'chat.stop' is not a list of text");
    for (const auto& s : *stop) {
      if (!s.is_string() || s.get<std::string>().empty())
        return invalid_argument("item parameters: 'chat.stop' holds an empty or non-text entry");
      o.stop.push_back(s.get<std::string>());
    }
  }
  return o;
}

ChatReplyReader::ChatReplyReader(const Tokenizer& tok, const ChatControls& controls,
                                 ChatReplyOptions options)
    : tok_(tok), c_(controls), options_(std::move(options)) {
  channel_ = options_.thinking ? Channel::kThink : Channel::kResponse;
  response_opened_ = !options_.thinking;
}

void ChatReplyReader::enter_tag(Place tag) {
  place_ = tag;
  tag_.clear();
}

// Appends text to the current channel and ends the reply at the earliest stop string that
// the new text completes (only the tail that the new bytes can reach is searched).
void ChatReplyReader::append(std::string_view bytes) {
  if (channel_ == Channel::kDropped) return;
  std::string& text = channel_ == Channel::kThink ? think_ : response_;
  const size_t before = text.size();
  text += bytes;
  size_t cut = std::string::npos;
  for (const std::string& s : options_.stop) {
    const size_t from = before >= s.size() ? before - s.size() + 1 : 0;
    const size_t at = text.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut == std::string::npos) return;
  text.resize(cut);
  end_ = ReplyEnd::kStopString;
}

bool ChatReplyReader::push(int32_t id) {
  if (id == c_.end_of_msg) {
    end_ = ReplyEnd::kEndOfMessage;
    return true;
  }
  if (id == c_.open) {
    enter_tag(Place::kOpeningTag);
    return false;
  }
  if (id == c_.close) {
    enter_tag(Place::kClosingTag);
    return false;
  }
  if (id == c_.sep) {
    if (place_ == Place::kOpeningTag) {
      const std::string name = tag_.substr(0, tag_.find_first_of(" \t\r\n"));
      if (name == "response") {
        channel_ = Channel::kResponse;
        response_opened_ = true;
      } else if (name == "think" && options_.thinking) {
        channel_ = Channel::kThink;
      } else {
        channel_ = Channel::kDropped;
      }
      place_ = Place::kBody;
    } else if (place_ == Place::kClosingTag) {
      place_ = Place::kBetween;
    }
    return false;
  }
  if (tok_.is_special(id)) return false;
  const std::optional<std::string_view> bytes = tok_.token_bytes(id);
  if (!bytes) return false;  // outside the vocabulary: no text
  if (place_ == Place::kBody)
    append(*bytes);
  else if (place_ == Place::kOpeningTag || place_ == Place::kClosingTag)
    tag_ += *bytes;
  return ended();
}

ChatReply ChatReplyReader::reply() const {
  ChatReply r;
  if (response_opened_) r.content = response_;
  if (options_.thinking) r.reasoning = think_;
  r.end = end_;
  return r;
}

ChatReply read_chat_reply(const Tokenizer& tok, const ChatControls& controls,
                          const ChatReplyOptions& options, std::span<const int32_t> ids) {
  ChatReplyReader reader(tok, controls, options);
  for (int32_t id : ids)
    if (reader.push(id)) break;
  return reader.reply();
}

}  // namespace nj::jobs
