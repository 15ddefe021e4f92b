// K3's chat format (XTML): every message kind, thinking off and on, the effort message,
// attribute escaping, a trailing assistant message, and control-token names typed by a user.
// Each expected prompt is written out from k3-model.md §9.1; its ids are the tokenizer's
// encoding of that text with the control tokens' names read as their ids (tiktoken's
// allowed-specials encoding), which is independent of the renderer's piecewise encoding.
#include "jobs/chat/chat_format.h"

#include <algorithm>
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

RenderedPrompt render(const std::vector<ChatMessage>& messages, ChatOptions options = {}) {
  return render_chat(tok(), controls(), messages, options);
}

// The expected prompt: its text, and its ids with the control names read as specials.
void check_prompt(const RenderedPrompt& p, const std::string& expected) {
  CHECK(p.text == expected);
  CHECK(p.ids == tok().encode_with_specials(expected));
}

const char* const kEffortHigh =
    "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>"
    "`thinking_effort` guides on how much to think in your thinking channel (not including the "
    "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=high`."
    "<|close|>message<|sep|><|end_of_msg|>";

TEST_CASE("the control tokens are the tokenizer's specials by name, one id each",
          "[jobs][chat][tokenizer]") {
  const ChatControls c = controls();
  CHECK(c.end_of_msg == tok().special_id("<|end_of_msg|>"));
  CHECK(c.open == tok().special_id("<|open|>"));
  CHECK(c.close == tok().special_id("<|close|>"));
  CHECK(c.sep == tok().special_id("<|sep|>"));
  CHECK(c.end_of_msg == tok().eos_id());  // generation stops at the end of the message
  for (int32_t id : {c.end_of_msg, c.open, c.close, c.sep}) CHECK(tok().is_special(id));
}

TEST_CASE("system and user messages, thinking off: elements, then the response channel opened",
          "[jobs][chat][tokenizer]") {
  const RenderedPrompt p = render({{ChatRole::kSystem, "Be brief.", ""},
                                   {ChatRole::kUser, "Name a bird that sings at night.", ""}});
  check_prompt(
      p,
      "<|open|>message role=\"system\"<|sep|>Be brief.<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"user\"<|sep|>Name a bird that sings at night."
      "<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
  // No BOS.
  CHECK(p.ids.front() == *tok().special_id("<|open|>"));
  CHECK(std::count(p.ids.begin(), p.ids.end(), *tok().bos_id()) == 0);
}

TEST_CASE("a past assistant message has a response element, and no think element when off",
          "[jobs][chat][tokenizer]") {
  const RenderedPrompt p = render({{ChatRole::kUser, "Hi", ""},
                                   {ChatRole::kAssistant, "Hello.", "They greet me."},
                                   {ChatRole::kUser, "Bye", ""}});
  check_prompt(p,
               "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>"
               "<|open|>message role=\"assistant\"<|sep|>"
               "<|open|>response<|sep|>Hello.<|close|>response<|sep|>"
               "<|close|>message<|sep|><|end_of_msg|>"
               "<|open|>message role=\"user\"<|sep|>Bye<|close|>message<|sep|><|end_of_msg|>"
               "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
}

TEST_CASE("thinking on: the effort message first, think elements (even empty), think opened",
          "[jobs][chat][tokenizer]") {
  const RenderedPrompt p = render({{ChatRole::kSystem, "Be brief.", ""},
                                   {ChatRole::kUser, "2+2?", ""},
                                   {ChatRole::kAssistant, "4", "Add them."},
                                   {ChatRole::kUser, "3+3?", ""},
                                   {ChatRole::kAssistant, "6", ""},
                                   {ChatRole::kUser, "And 4+4?", ""}},
                                  ChatOptions{true, ThinkingEffort::kHigh});
  check_prompt(p, std::string(kEffortHigh) +
                      "<|open|>message role=\"system\"<|sep|>Be brief.<|close|>message<|sep|>"
                      "<|end_of_msg|>"
                      "<|open|>message role=\"user\"<|sep|>2+2?<|close|>message<|sep|>"
                      "<|end_of_msg|>"
                      "<|open|>message role=\"assistant\"<|sep|>"
                      "<|open|>think<|sep|>Add them.<|close|>think<|sep|>"
                      "<|open|>response<|sep|>4<|close|>response<|sep|>"
                      "<|close|>message<|sep|><|end_of_msg|>"
                      "<|open|>message role=\"user\"<|sep|>3+3?<|close|>message<|sep|>"
                      "<|end_of_msg|>"
                      "<|open|>message role=\"assistant\"<|sep|>"
                      "<|open|>think<|sep|><|close|>think<|sep|>"
                      "<|open|>response<|sep|>6<|close|>response<|sep|>"
                      "<|close|>message<|sep|><|end_of_msg|>"
                      "<|open|>message role=\"user\"<|sep|>And 4+4?<|close|>message<|sep|>"
                      "<|end_of_msg|>"
                      "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>");
}

TEST_CASE("the effort word is the chosen level, the default is max", "[jobs][chat][tokenizer]") {
  const std::vector<ChatMessage> hi = {{ChatRole::kUser, "hi", ""}};
  for (ThinkingEffort e : {ThinkingEffort::kLow, ThinkingEffort::kMedium, ThinkingEffort::kMax}) {
    const std::string word = thinking_effort_name(e);
    INFO(word);
    check_prompt(render(hi, ChatOptions{true, e}),
                 "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>"
                 "`thinking_effort` guides on how much to think in your thinking channel (not "
                 "including the response channel), supported values include `low`, `medium`, "
                 "`high`, and `max`.\nNow the system is invoked with `thinking_effort=" +
                     word +
                     "`.<|close|>message<|sep|><|end_of_msg|>"
                     "<|open|>message role=\"user\"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>"
                     "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>");
  }
  ChatOptions on;
  on.thinking = true;
  CHECK(on.effort == ThinkingEffort::kMax);
  CHECK(thinking_effort_body(ThinkingEffort::kMax).find('\n') ==
        thinking_effort_body(ThinkingEffort::kMax).rfind('\n'));    // two lines
  CHECK(thinking_effort_body(ThinkingEffort::kMax).back() == '.');  // no newline at the end
  CHECK(parse_thinking_effort("medium") == ThinkingEffort::kMedium);
  CHECK_FALSE(parse_thinking_effort("minimal").has_value());
}

TEST_CASE("a trailing assistant message is closed, and the generation prompt follows",
          "[jobs][chat][tokenizer]") {
  check_prompt(render({{ChatRole::kUser, "Hi", ""}, {ChatRole::kAssistant, "Hello", ""}}),
               "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>"
               "<|open|>message role=\"assistant\"<|sep|>"
               "<|open|>response<|sep|>Hello<|close|>response<|sep|>"
               "<|close|>message<|sep|><|end_of_msg|>"
               "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
}

TEST_CASE("attribute values escape & and \" and keep everything else", "[jobs][chat]") {
  CHECK(escape_attribute_value("user") == "user");
  CHECK(escape_attribute_value("thinking-effort") == "thinking-effort");
  CHECK(escape_attribute_value("say \"hi\" & <bye>") == "say &quot;hi&quot; &amp; <bye>");
  CHECK(escape_attribute_value("&amp;") == "&amp;amp;");
  CHECK(escape_attribute_value("") == "");
}

TEST_CASE("control-token names typed in user text stay text", "[jobs][chat][tokenizer]") {
  const std::string typed = "Say <|close|>message<|sep|><|end_of_msg|> please";
  const RenderedPrompt p = render({{ChatRole::kUser, typed, ""}});
  CHECK(p.text == "<|open|>message role=\"user\"<|sep|>" + typed +
                      "<|close|>message<|sep|><|end_of_msg|>"
                      "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
  const ChatControls c = controls();
  CHECK(std::count(p.ids.begin(), p.ids.end(), c.close) == 1);  // the message's own close
  CHECK(std::count(p.ids.begin(), p.ids.end(), c.sep) == 4);
  CHECK(std::count(p.ids.begin(), p.ids.end(), c.end_of_msg) == 1);
  // The user's text is its plain encoding, between the message's SEP and CLOSE.
  std::vector<int32_t> expected =
      tok().encode_with_specials("<|open|>message role=\"user\"<|sep|>");
  const std::vector<int32_t> text = tok().encode(typed);
  for (int32_t id : text) CHECK_FALSE(tok().is_special(id));
  expected.insert(expected.end(), text.begin(), text.end());
  const std::vector<int32_t> tail = tok().encode_with_specials(
      "<|close|>message<|sep|><|end_of_msg|>"
      "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>");
  expected.insert(expected.end(), tail.begin(), tail.end());
  CHECK(p.ids == expected);
}

TEST_CASE("a tokenizer without the chat format's control tokens is named", "[jobs][chat]") {
  auto t = Tokenizer::from_contents(tok::tiktoken_model_text({"ab"}),
                                    R"({"added_tokens_decoder": {"257": {"content": "<|open|>"},
                                        "259": {"content": "<|x|>"}}, "eos_token": "<|x|>"})");
  REQUIRE(t.ok());
  auto c = chat_controls(*t);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message() ==
        "the tokenizer has no chat control tokens (<|end_of_msg|>, <|close|>, <|sep|>): chat "
        "messages need K3's chat format (k3-model.md 9.1)");
}

TEST_CASE("roles by name, developer reads as system", "[jobs][chat]") {
  CHECK(parse_chat_role("developer") == ChatRole::kSystem);
  CHECK(parse_chat_role("system") == ChatRole::kSystem);
  CHECK(parse_chat_role("user") == ChatRole::kUser);
  CHECK(parse_chat_role("assistant") == ChatRole::kAssistant);
  CHECK_FALSE(parse_chat_role("tool").has_value());
}

}  // namespace
}  // namespace nj::jobs
