// OpenAI Batch API input lines: parsed settings (sampling, thinking, stop strings,
// logprobs) and positioned errors. The prompt layout is tested in chat_format_test.cpp.
#include "jobs/openai/openai_batch.h"

#include <algorithm>

#include <catch2/catch.hpp>

#include "jobs/chat/chat_format.h"

namespace nj::jobs {
namespace {

TEST_CASE("batch lines become requests with their settings, nulls and blank lines are skipped",
          "[jobs][openai]") {
  const std::string text =
      R"({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0.5, "seed": 9, "top_p": 0.75}})"
      "\n\n"
      R"({"custom_id": "b", "body": {"messages": [{"role": "developer", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}], "max_completion_tokens": 7, "temperature": null}})"
      "\n";
  auto reqs = parse_openai_batch(text, "in.jsonl");
  REQUIRE(reqs.ok());
  REQUIRE(reqs->size() == 2);
  const OpenAiRequest& a = (*reqs)[0];
  CHECK(a.line == 1);
  CHECK(a.custom_id == "a");
  CHECK(a.params.max_tokens == 5);
  CHECK(a.params.sampling.temperature == 0.5f);
  CHECK(a.params.sampling.seed == 9);
  CHECK(a.params.sampling.top_p == 0.75f);
  const OpenAiRequest& b = (*reqs)[1];
  CHECK(b.line == 3);
  CHECK(b.params.max_tokens == 7);
  CHECK(b.params.sampling.temperature == kDefaultOpenAiTemperature);  // null: as if absent
  REQUIRE(b.messages.size() == 1);
  CHECK(b.messages[0].role == ChatRole::kSystem);
  CHECK(b.messages[0].content == "xy");
}

TEST_CASE("every bad line is reported with the file and its line number", "[jobs][openai]") {
  const std::string text =
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "x"}]}})"
      "\n"
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "x"}]}})"
      "\n"
      "{oops\n"
      R"({"body": {"messages": [{"role": "user", "content": "x"}], "tools": []}})"
      "\n";
  auto reqs = parse_openai_batch(text, "in.jsonl");
  REQUIRE_FALSE(reqs.ok());
  const std::string& m = reqs.status().message();
  CHECK_THAT(m, Catch::Contains("in.jsonl:2: custom_id: duplicate 'a' (first used at line 1)"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:3: malformed JSON: column"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:4: custom_id: missing"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:4: body.tools: unsupported field"));
  CHECK(parse_openai_batch("\n  \n", "e.jsonl").status().message() ==
        "e.jsonl: no requests (the file has no lines)");
}

// The request of a one-line file whose body adds `extra` (JSON members) to one user message.
Result<std::vector<OpenAiRequest>> one(const std::string& extra) {
  return parse_openai_batch(
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi"}])" +
          (extra.empty() ? "" : ", " + extra) + "}}\n",
      "in.jsonl");
}

TEST_CASE("thinking is off unless reasoning_effort or chat_template_kwargs turn it on",
          "[jobs][openai][chat]") {
  auto plain = one("");
  REQUIRE(plain.ok());
  CHECK_FALSE((*plain)[0].chat.thinking);
  REQUIRE((*plain)[0].params.chat.has_value());
  CHECK_FALSE((*plain)[0].params.chat->thinking);

  auto effort = one(R"("reasoning_effort": "low")");
  REQUIRE(effort.ok());
  CHECK((*effort)[0].chat.thinking);
  CHECK((*effort)[0].chat.effort == ThinkingEffort::kLow);
  CHECK((*effort)[0].params.chat->thinking);

  auto kwargs = one(R"("chat_template_kwargs": {"thinking": true})");
  REQUIRE(kwargs.ok());
  CHECK((*kwargs)[0].chat.thinking);
  CHECK((*kwargs)[0].chat.effort == ThinkingEffort::kMax);  // the release's default

  auto both = one(
      R"("reasoning_effort": "high", "chat_template_kwargs": {"thinking": true, "thinking_effort": "high"})");
  REQUIRE(both.ok());
  CHECK((*both)[0].chat.effort == ThinkingEffort::kHigh);

  auto off = one(R"("chat_template_kwargs": {"thinking": false})");
  REQUIRE(off.ok());
  CHECK_FALSE((*off)[0].chat.thinking);
}

TEST_CASE("thinking settings that disagree or are unknown are errors naming the field",
          "[jobs][openai][chat]") {
  auto error = [](const std::string& extra) { return one(extra).status().message(); };
  CHECK_THAT(error(R"("reasoning_effort": "max")"),
             Catch::Contains(
                 "in.jsonl:1: body.reasoning_effort: expected \"low\", \"medium\" or \"high\""));
  CHECK_THAT(error(R"("reasoning_effort": "low", "chat_template_kwargs": {"thinking": false})"),
             Catch::Contains("body.chat_template_kwargs.thinking: false, but reasoning_effort"));
  CHECK_THAT(error(R"("chat_template_kwargs": {"thinking_effort": "low"})"),
             Catch::Contains("thinking_effort: needs \"thinking\": true"));
  CHECK_THAT(
      error(
          R"("reasoning_effort": "low", "chat_template_kwargs": {"thinking": true, "thinking_effort": "high"})"),
      Catch::Contains("'high' disagrees with reasoning_effort 'low'"));
  CHECK_THAT(error(R"("chat_template_kwargs": {"thinking": true, "enable_thinking": true})"),
             Catch::Contains("body.chat_template_kwargs.enable_thinking: unsupported field"));
  CHECK_THAT(error(R"("chat_template_kwargs": {"thinking": "yes"})"),
             Catch::Contains("body.chat_template_kwargs.thinking: expected true or false"));
}

TEST_CASE("stop, logprobs and top_logprobs become item settings", "[jobs][openai][chat]") {
  auto one_stop = one(R"("stop": "\n")");
  REQUIRE(one_stop.ok());
  CHECK((*one_stop)[0].params.chat->stop == std::vector<std::string>{"\n"});
  auto stops = one(
      R"("stop": ["a", "bb"], "logprobs": true, "top_logprobs": 3, "reasoning_effort": "medium")");
  REQUIRE(stops.ok());
  const GenerateParams& p = (*stops)[0].params;
  CHECK(p.chat->stop == std::vector<std::string>{"a", "bb"});
  CHECK(p.chat->thinking);
  CHECK(p.logprobs);
  CHECK(p.top_logprobs == 3);
  // They survive the store: the item's parameters as JSON and back.
  auto back = generate_params_from_json(generate_params_to_json(p));
  REQUIRE(back.ok());
  CHECK(back->chat == p.chat);
  CHECK(back->logprobs);
  CHECK(back->top_logprobs == 3);
  // A plain item stores what it always did.
  CHECK_FALSE(generate_params_to_json(GenerateParams{}).contains("chat"));
  CHECK_FALSE(generate_params_to_json(GenerateParams{}).contains("logprobs"));

  auto error = [](const std::string& extra) { return one(extra).status().message(); };
  CHECK_THAT(error(R"("stop": ["a", "b", "c", "d", "e"])"),
             Catch::Contains("body.stop: expected a non-empty text or a list of 1 to 4"));
  CHECK_THAT(error(R"("stop": [""])"), Catch::Contains("body.stop"));
  CHECK_THAT(error(R"("stop": 5)"), Catch::Contains("body.stop"));
  CHECK_THAT(error(R"("top_logprobs": 2)"),
             Catch::Contains("body.top_logprobs: needs \"logprobs\": true"));
  CHECK_THAT(error(R"("logprobs": true, "top_logprobs": 21)"),
             Catch::Contains("body.top_logprobs: expected a whole number in 0..20"));
  CHECK_THAT(error(R"("logprobs": 1)"), Catch::Contains("body.logprobs: expected true or false"));
}

TEST_CASE("an assistant message's reasoning_content is read, other roles may not have one",
          "[jobs][openai][chat]") {
  auto reqs = parse_openai_batch(
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "reasoning_content": "greet"}, {"role": "user", "content": "and?", "reasoning_content": null}]}})"
      "\n",
      "in.jsonl");
  REQUIRE(reqs.ok());
  REQUIRE((*reqs)[0].messages.size() == 3);
  CHECK((*reqs)[0].messages[1].role == ChatRole::kAssistant);
  CHECK((*reqs)[0].messages[1].reasoning == "greet");
  auto bad = parse_openai_batch(
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "hi", "reasoning_content": "x"}]}})"
      "\n",
      "in.jsonl");
  CHECK_THAT(bad.status().message(),
             Catch::Contains("in.jsonl:1: body.messages[0].reasoning_content: only assistant "
                             "messages have reasoning"));
}

}  // namespace
}  // namespace nj::jobs
