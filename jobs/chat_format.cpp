// K3's chat format: turns wrapped in <|open|> ROLE <|sep|> CONTENT <|close|>.
#include "jobs/chat_format.h"

#include <optional>

namespace nj::jobs {
namespace {

constexpr const char* kOpen = "<|open|>";
constexpr const char* kSep = "<|sep|>";
constexpr const char* kClose = "<|close|>";

void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids) {
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace

bool is_chat_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant";
}

Status check_chat_specials(const Tokenizer& tok) {
  std::string missing;
  for (const char* name : {kOpen, kSep, kClose})
    if (!tok.special_id(name)) missing += std::string(missing.empty() ? "" : ", ") + name;
  if (missing.empty()) return Status();
  return invalid_argument("the tokenizer has no chat special tokens (" + missing +
                          "): chat messages need K3's chat format");
}

std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages) {
  const int32_t open = *tok.special_id(kOpen);
  const int32_t sep = *tok.special_id(kSep);
  const int32_t close = *tok.special_id(kClose);
  std::vector<int32_t> ids;
  for (const ChatMessage& m : messages) {
    ids.push_back(open);
    append(ids, tok.encode(m.role));
    ids.push_back(sep);
    append(ids, tok.encode(m.content));
    ids.push_back(close);
  }
  ids.push_back(open);
  append(ids, tok.encode("assistant"));
  ids.push_back(sep);
  return ids;
}

}  // namespace nj::jobs
