// Chat files for `tokenize|generate --chat-file`: OpenAI-style messages read into
// ChatMessage, and every problem named with the file and the message's path.
#include "jobs/chat/chat_messages.h"

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

namespace nj::jobs {
namespace {

std::string write_chat_file(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(NJ_TEST_WORK_DIR);
  const std::string path = std::string(NJ_TEST_WORK_DIR) + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

TEST_CASE("a chat file's messages are read with their roles and text", "[jobs][chat]") {
  const std::string path =
      write_chat_file("chat-ok.json",
                      R"({"messages": [{"role": "developer", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": "c", "reasoning_content": "r"}]})");
  auto messages = load_chat_file(path);
  REQUIRE(messages.ok());
  REQUIRE(messages->size() == 3);
  CHECK((*messages)[0].role == ChatRole::kSystem);
  CHECK((*messages)[0].content == "Be brief.");
  CHECK((*messages)[1].content == "ab");
  CHECK((*messages)[2].role == ChatRole::kAssistant);
  CHECK((*messages)[2].reasoning == "r");
}

TEST_CASE("a bad chat file names the file and every problem", "[jobs][chat]") {
  const std::string path =
      write_chat_file("chat-bad.json",
                      R"({"messages": [{"role": "tool", "content": "x"}, {"role": "user"},
                       {"role": "user", "content": "y", "name": "bob"}],
          "model": "k3"})");
  auto messages = load_chat_file(path);
  REQUIRE_FALSE(messages.ok());
  CHECK(messages.status().code() == StatusCode::kInvalidArgument);
  const std::string& m = messages.status().message();
  CHECK_THAT(m, Catch::Contains(path + ": model: unsupported field"));
  CHECK_THAT(m, Catch::Contains(path + ": messages[0].role: unsupported role 'tool'"));
  CHECK_THAT(m, Catch::Contains(path + ": messages[1].content: missing"));
  CHECK_THAT(m, Catch::Contains(path + ": messages[2].name: unsupported field"));

  CHECK_THAT(
      load_chat_file(write_chat_file("chat-syntax.json", "{\"messages\": [")).status().message(),
      Catch::Contains("chat-syntax.json: malformed JSON"));
  CHECK(load_chat_file(write_chat_file("chat-list.json", "[]")).status().message() ==
        std::string(NJ_TEST_WORK_DIR) + "/chat-list.json: expected {\"messages\": [...]}");
  CHECK(load_chat_file(write_chat_file("chat-empty.json", R"({"messages": []})"))
            .status()
            .message() ==
        std::string(NJ_TEST_WORK_DIR) +
            "/chat-empty.json: messages: expected a non-empty list of {role, content}");
  CHECK(load_chat_file(std::string(NJ_TEST_WORK_DIR) + "/no-such-chat.json").status().code() ==
        StatusCode::kNotFound);
}

}  // namespace
}  // namespace nj::jobs
