// OpenAI Batch API input lines and K3's chat format: parsed settings, positioned errors,
// and the prompt layout.
#include "jobs/openai_batch.h"

#include <algorithm>

#include <catch2/catch.hpp>

#include "jobs/chat_format.h"
#include "tests/unit/tokenizer/test_vocab.h"

namespace nj::jobs {
namespace {

TEST_CASE("batch lines become requests with their settings; nulls and blank lines are skipped",
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
  CHECK(b.params.sampling.temperature == 0.0f);
  REQUIRE(b.messages.size() == 1);
  CHECK(b.messages[0].role == "system");
  CHECK(b.messages[0].content == "xy");
}

TEST_CASE("every bad line is reported with the file and its line number", "[jobs][openai]") {
  const std::string text =
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "x"}]}})"
      "\n"
      R"({"custom_id": "a", "body": {"messages": [{"role": "user", "content": "x"}]}})"
      "\n"
      "{oops\n"
      R"({"body": {"messages": [{"role": "user", "content": "x"}], "stop": ["\n"]}})"
      "\n";
  auto reqs = parse_openai_batch(text, "in.jsonl");
  REQUIRE_FALSE(reqs.ok());
  const std::string& m = reqs.status().message();
  CHECK_THAT(m, Catch::Contains("in.jsonl:2: custom_id: duplicate 'a' (first used at line 1)"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:3: malformed JSON: column"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:4: custom_id: missing"));
  CHECK_THAT(m, Catch::Contains("in.jsonl:4: body.stop: unsupported field"));
  CHECK(parse_openai_batch("\n  \n", "e.jsonl").status().message() ==
        "e.jsonl: no requests (the file has no lines)");
}

TEST_CASE("chat messages render as open ROLE sep CONTENT close, then the assistant's turn",
          "[jobs][openai][tokenizer]") {
  const Tokenizer& tok = tok::generated_tokenizer();
  REQUIRE(check_chat_specials(tok).ok());
  const int32_t open = *tok.special_id("<|open|>"), sep = *tok.special_id("<|sep|>"),
                close = *tok.special_id("<|close|>");
  const std::vector<ChatMessage> messages = {{"system", "Be brief."},
                                             {"user", "Say <|close|> please"}};
  std::vector<int32_t> expected;
  for (const auto& m : messages) {
    expected.push_back(open);
    for (int32_t id : tok.encode(m.role)) expected.push_back(id);
    expected.push_back(sep);
    for (int32_t id : tok.encode(m.content)) expected.push_back(id);
    expected.push_back(close);
  }
  expected.push_back(open);
  for (int32_t id : tok.encode("assistant")) expected.push_back(id);
  expected.push_back(sep);
  const std::vector<int32_t> ids = render_chat(tok, messages);
  CHECK(ids == expected);
  CHECK(std::count(ids.begin(), ids.end(), close) == 2);  // the typed name stays text
}

}  // namespace
}  // namespace nj::jobs
