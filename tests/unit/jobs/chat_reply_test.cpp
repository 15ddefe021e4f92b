// Reading a chat reply (jobs/chat/chat_reply.h): reasoning and answer split, the reply's end
// at <|end_of_msg|> (also inside the think channel), cut-offs at max_tokens, stop strings.
// The replies are what §9.1 says the model writes after the generation prompt, as ids.
#include "jobs/chat/chat_reply.h"

#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::jobs {
namespace {

const Tokenizer& tok() {
  return tok::generated_tokenizer();
}

ChatControls controls() {
  auto c = chat_controls(tok());
  REQUIRE(c.ok());
  return *c;
}

// The ids of a reply written with the control tokens' names.
std::vector<int32_t> ids(const std::string& text) {
  return tok().encode_with_specials(text);
}

ChatReply read(const std::string& text, ChatReplyOptions options) {
  return read_chat_reply(tok(), controls(), options, ids(text));
}

ChatReplyOptions thinking(std::vector<std::string> stop = {}) {
  return {true, std::move(stop)};
}
ChatReplyOptions answering(std::vector<std::string> stop = {}) {
  return {false, std::move(stop)};
}

// How many of `all` the reader takes before it says the reply has ended (all if never).
size_t tokens_read(const std::vector<int32_t>& all, const ChatReplyOptions& options) {
  ChatReplyReader reader(tok(), controls(), options);
  for (size_t i = 0; i < all.size(); ++i)
    if (reader.push(all[i])) return i + 1;
  return all.size();
}

TEST_CASE("thinking off: the answer is the response channel's body", "[jobs][chat][tokenizer]") {
  const std::string reply =
      "The nightjar.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>";
  const ChatReply r = read(reply, answering());
  CHECK(r.content == "The nightjar.");
  CHECK_FALSE(r.reasoning.has_value());
  CHECK(r.end == ReplyEnd::kEndOfMessage);
  CHECK(tokens_read(ids(reply), answering()) == ids(reply).size());  // ends at the last token
}

TEST_CASE("thinking on: reasoning and answer split, the envelope in neither",
          "[jobs][chat][tokenizer]") {
  const std::string reply =
      "Nightjars hunt at dusk.\nSo: the nightjar.<|close|>think<|sep|>"
      "<|open|>response<|sep|>The nightjar.<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>";
  const ChatReply r = read(reply, thinking());
  CHECK(r.reasoning == "Nightjars hunt at dusk.\nSo: the nightjar.");
  CHECK(r.content == "The nightjar.");
  CHECK(r.end == ReplyEnd::kEndOfMessage);
  // Stopping at the first <|close|> (the old guess) would have kept only the reasoning.
  // With thinking off the same tokens read as an answer, and the later think tag is dropped.
  const ChatReply off = read(reply, answering());
  CHECK(off.content == "Nightjars hunt at dusk.\nSo: the nightjar.The nightjar.");
}

TEST_CASE("a reply ending inside the think channel keeps its reasoning and has no answer",
          "[jobs][chat][tokenizer]") {
  const ChatReply r = read("I am not sure<|end_of_msg|>", thinking());
  CHECK(r.reasoning == "I am not sure");
  CHECK_FALSE(r.content.has_value());
  CHECK(r.end == ReplyEnd::kEndOfMessage);
}

TEST_CASE("cut off at max_tokens: open reply, channels so far", "[jobs][chat][tokenizer]") {
  // Inside the think channel: content null, reasoning kept.
  const ChatReply in_think = read("Let me count: one, two", thinking());
  CHECK(in_think.end == ReplyEnd::kOpen);
  CHECK(in_think.reasoning == "Let me count: one, two");
  CHECK_FALSE(in_think.content.has_value());
  // Inside the response channel: the answer so far.
  const ChatReply in_answer =
      read("Count.<|close|>think<|sep|><|open|>response<|sep|>One, two", thinking());
  CHECK(in_answer.end == ReplyEnd::kOpen);
  CHECK(in_answer.reasoning == "Count.");
  CHECK(in_answer.content == "One, two");
  // Between the two channels: the answer has been reached by nothing yet.
  const ChatReply between = read("Count.<|close|>think<|sep|>", thinking());
  CHECK_FALSE(between.content.has_value());
  // Thinking off, cut at once: an empty answer, not a missing one.
  const ChatReply empty = read("", answering());
  CHECK(empty.content == "");
}

TEST_CASE("a stop string ends the reply and is left out of the text", "[jobs][chat][tokenizer]") {
  const std::string reply =
      "one, two, three, four<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>";
  const ChatReply r = read(reply, answering({"three"}));
  CHECK(r.content == "one, two, ");
  CHECK(r.end == ReplyEnd::kStopString);
  // The reader stops at the token that completes the stop string, matched on the text
  // (the tokens around it need not line up with it).
  const std::vector<int32_t> all = ids(reply);
  const size_t n = tokens_read(all, answering({"hree, f"}));
  CHECK(n < all.size());
  const std::string read_text = tok().decode(std::span<const int32_t>(all).first(n));
  CHECK(read_text.find("hree, f") != std::string::npos);
  CHECK(tok().decode(std::span<const int32_t>(all).first(n - 1)).find("hree, f") ==
        std::string::npos);
  CHECK(read_chat_reply(tok(), controls(), answering({"hree, f"}), all).content == "one, two, t");
  // The earliest of several stop strings wins, whichever is listed first.
  CHECK(read(reply, answering({"four", "two"})).content == "one, ");
  // A stop string that never appears changes nothing.
  const ChatReply none = read(reply, answering({"five"}));
  CHECK(none.content == "one, two, three, four");
  CHECK(none.end == ReplyEnd::kEndOfMessage);
}

TEST_CASE("a stop string inside the think channel ends the reply there, without an answer",
          "[jobs][chat][tokenizer]") {
  const std::string reply =
      "Step 1. Step 2. Step 3.<|close|>think<|sep|><|open|>response<|sep|>Done."
      "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>";
  const ChatReply r = read(reply, thinking({"Step 2"}));
  CHECK(r.end == ReplyEnd::kStopString);
  CHECK(r.reasoning == "Step 1. ");
  CHECK_FALSE(r.content.has_value());
  // Matched per channel: text on both sides of the channel boundary does not make a match.
  const ChatReply across = read(reply, thinking({"3.Done"}));
  CHECK(across.end == ReplyEnd::kEndOfMessage);
  CHECK(across.content == "Done.");
}

TEST_CASE("specials that are not control tokens and unknown elements carry no text",
          "[jobs][chat][tokenizer]") {
  const ChatReply r = read(
      "A[BOS]B<|open|>tool name=\"x\"<|sep|>dropped<|close|>tool<|sep|>between"
      "<|open|>response<|sep|>C<|close|>response<|sep|><|end_of_msg|>",
      answering());
  CHECK(r.content == "ABC");
  // A name typed as text inside the answer is text (the model wrote text tokens).
  std::vector<int32_t> typed = tok().encode("x<|close|>y");
  const ChatReply t = read_chat_reply(tok(), controls(), answering(), typed);
  CHECK(t.content == "x<|close|>y");
  CHECK(t.end == ReplyEnd::kOpen);
}

TEST_CASE("chat reply options round-trip through their stored JSON", "[jobs][chat]") {
  const ChatReplyOptions o{true, {"\n\n", "END"}};
  auto back = chat_reply_from_json(chat_reply_to_json(o));
  REQUIRE(back.ok());
  CHECK(*back == o);
  CHECK(chat_reply_to_json(answering()) == nlohmann::json{{"thinking", false}});
  CHECK(chat_reply_from_json(nlohmann::json{{"thinking", 1}}).status().message() ==
        "item parameters: 'chat.thinking' missing or not true or false");
  CHECK(
      chat_reply_from_json(nlohmann::json{{"thinking", true}, {"stop", {""}}}).status().message() ==
      "item parameters: 'chat.stop' holds an empty or non-text entry");
}

}  // namespace
}  // namespace nj::jobs
