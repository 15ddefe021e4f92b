// Reading what the model writes after a chat prompt (k3-model.md §9.1) into its channels:
// the answer (the response channel) and the reasoning (the think channel).
//
// After the generation prompt (chat_format.h) a well-formed reply is
//
//   reply = [REASONING CLOSE "think" SEP OPEN "response" SEP]     thinking on
//           ANSWER CLOSE "response" SEP CLOSE "message" SEP EOM
//
// It is read token by token, so that the runner can stop as soon as the reply ends, and
// leniently, because a model may write anything. Text tokens (ids that are not special)
// carry text; special ids other than the four control tokens carry none. The reader is in
// one of three places:
//
//   in a body   (it starts in the body of the channel the prompt opened: think when
//               thinking is on, else response)
//               text  -> appended to that channel (the body of any other element is dropped)
//               OPEN  -> in a tag (opening)     CLOSE -> in a tag (closing)
//               EOM   -> the reply has ended    SEP   -> nothing
//   in a tag    text  -> the tag's text
//               SEP   -> an opening tag whose first word is "response" (or "think" when
//                        thinking is on) enters the body of that channel (a channel opened
//                        twice continues its text); any other opening tag enters a dropped
//                        body; a closing tag leaves the reader between elements
//               OPEN, CLOSE -> a new tag            EOM -> the reply has ended
//   between     text, SEP -> nothing    OPEN, CLOSE -> a new tag    EOM -> the reply has ended
//
// So the envelope (control tokens, tag names) never reaches the text.
//
// Stop strings (the API's `stop`) are matched on each channel's text as it grows, as the
// API matches them on the detokenized text: when one appears, that channel keeps the text
// before it and the reply has ended.
//
// What comes back: `content` is the response channel's text, null when the reply never
// reached it (e.g. cut off inside the think channel); `reasoning` is the think channel's
// text when thinking is on (never null then), and null when thinking is off.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/status.h"
#include "jobs/chat/chat_format.h"

namespace nj::jobs {

// How a chat item's output is read; stored with the item (chat_reply_to_json).
struct ChatReplyOptions {
  bool thinking = false;          // the prompt opened the think channel
  std::vector<std::string> stop;  // stop strings, each non-empty
  bool operator==(const ChatReplyOptions&) const = default;
};

// {"thinking": BOOL, "stop": [TEXT, ...]} ("stop" only when there are some).
nlohmann::json chat_reply_to_json(const ChatReplyOptions& o);
// The inverse; InvalidArgument naming the field when mistyped.
Result<ChatReplyOptions> chat_reply_from_json(const nlohmann::json& j);

enum class ReplyEnd {
  kOpen,          // not ended yet
  kEndOfMessage,  // the model wrote EOM
  kStopString,    // a stop string appeared
};

struct ChatReply {
  std::optional<std::string> content;    // the response channel's text
  std::optional<std::string> reasoning;  // the think channel's text (thinking on)
  ReplyEnd end = ReplyEnd::kOpen;
};

// Reads one reply, token by token. Not thread-safe; cheap to create.
class ChatReplyReader {
 public:
  // REQUIRES: `tok` outlives the reader; controls == chat_controls(tok).
  ChatReplyReader(const Tokenizer& tok, const ChatControls& controls, ChatReplyOptions options);

  // Reads the next generated token. Returns true when the reply has ended with it.
  // REQUIRES: !ended().
  bool push(int32_t id);
  bool ended() const { return end_ != ReplyEnd::kOpen; }
  ReplyEnd end() const { return end_; }

  // The channels so far (complete once ended()).
  ChatReply reply() const;

 private:
  enum class Place { kBody, kOpeningTag, kClosingTag, kBetween };
  enum class Channel { kThink, kResponse, kDropped };

  void enter_tag(Place tag);
  void append(std::string_view bytes);

  const Tokenizer& tok_;
  ChatControls c_;
  ChatReplyOptions options_;
  Place place_ = Place::kBody;
  Channel channel_ = Channel::kResponse;
  std::string tag_;  // the text of the tag being read
  std::string think_, response_;
  bool response_opened_ = false;
  ReplyEnd end_ = ReplyEnd::kOpen;
};

// The whole reply of `ids`, read until it ends (tokens after its end are not read).
// REQUIRES: as ChatReplyReader.
ChatReply read_chat_reply(const Tokenizer& tok, const ChatControls& controls,
                          const ChatReplyOptions& options, std::span<const int32_t> ids);

}  // namespace nj::jobs
