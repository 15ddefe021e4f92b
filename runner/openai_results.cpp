// OpenAI Batch API output lines (the shape is documented in openai_results.h).
#include "runner/openai_results.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

#include "jobs/chat/chat_format.h"
#include "jobs/chat/chat_reply.h"

namespace nj::runner {
namespace {

using nlohmann::json;

std::string item_key(const JobRow& job, const ItemRow& item) {
  return std::to_string(job.id) + "_" + std::to_string(item.id);
}

json error_of(const ItemRow& item) {
  switch (item.state) {
    case ItemState::kFailed:
      return {{"code", "item_failed"}, {"message", item.last_error.value_or("the item failed")}};
    case ItemState::kCancelled:
      return {{"code", "item_cancelled"},
              {"message", "cancelled" + (item.last_error ? " (" + *item.last_error + ")" : "")}};
    default:
      return {{"code", "not_finished"},
              {"message", std::string("the item is ") + item_state_name(item.state) + " (" +
                              std::to_string(item.tokens_done) + " of " +
                              std::to_string(item.max_tokens) + " tokens)"}};
  }
}

// The answer text of a plain item: the output without its closing end-of-sequence token.
json plain_content(const ResultRow& r, const Tokenizer* tok) {
  if (!tok) return r.output_text ? json(*r.output_text) : json(nullptr);
  std::span<const int32_t> ids(r.output_ids);
  if (r.finish_reason == "stop" && !ids.empty() && ids.back() == tok->eos_id())
    ids = ids.first(ids.size() - 1);
  return tok->decode(ids);
}

bool asks_for_logprobs(const json& params) {
  auto it = params.find("logprobs");
  return it != params.end() && it->is_boolean() && it->get<bool>();
}
bool asks_for_logprobs(const ItemRow& item) {
  const json params = json::parse(item.params_json, nullptr, false);
  return params.is_object() && asks_for_logprobs(params);
}

// A token as the API shows it: its text and its bytes.
json token_json(const Tokenizer& tok, int32_t id, float logprob) {
  const std::string_view bytes = tok.token_bytes(id).value_or(std::string_view());
  json b = json::array();
  for (char c : bytes) b.push_back(static_cast<uint8_t>(c));
  return {{"token", std::string(bytes)}, {"logprob", logprob}, {"bytes", b}};
}

Result<json> logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& ids,
                           const std::vector<TokenLogprobs>& logprobs) {
  if (logprobs.size() != ids.size())
    return corruption(std::to_string(logprobs.size()) + " log-probabilities stored for " +
                      std::to_string(ids.size()) + " output tokens");
  json content = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    json t = token_json(tok, ids[i], logprobs[i].logprob);
    json top = json::array();
    for (const auto& [id, lp] : logprobs[i].top) top.push_back(token_json(tok, id, lp));
    t["top_logprobs"] = std::move(top);
    content.push_back(std::move(t));
  }
  return json{{"content", std::move(content)}};
}

// The message and logprobs of a done item, as its stored parameters say to read them.
Result<std::pair<json, json>> message_of(const ItemRow& item, const ResultRow& r,
                                         const OpenAiLineInputs& in) {
  const json params = json::parse(item.params_json, nullptr, false);
  if (!params.is_object())
    return invalid_argument("item '" + item.custom_id + "': its stored parameters do not parse");
  json message = {{"role", "assistant"}};
  if (auto chat = params.find("chat"); chat != params.end()) {
    NJ_ASSIGN_OR_RETURN(jobs::ChatReplyOptions options, jobs::chat_reply_from_json(*chat));
    if (!in.tok)
      return invalid_argument("item '" + item.custom_id +
                              "': its chat reply needs the model's tokenizer");
    NJ_ASSIGN_OR_RETURN(jobs::ChatControls controls, jobs::chat_controls(*in.tok));
    const jobs::ChatReply reply = jobs::read_chat_reply(*in.tok, controls, options, r.output_ids);
    message["content"] = reply.content ? json(*reply.content) : json(nullptr);
    if (reply.reasoning) message["reasoning_content"] = *reply.reasoning;
  } else {
    message["content"] = plain_content(r, in.tok);
  }
  json logprobs = nullptr;
  if (asks_for_logprobs(params)) {
    if (!in.tok || !in.logprobs)
      return invalid_argument("item '" + item.custom_id +
                              "': its log-probabilities need the model's tokenizer");
    NJ_ASSIGN_OR_RETURN(logprobs, logprobs_json(*in.tok, r.output_ids, *in.logprobs));
  }
  return std::make_pair(std::move(message), std::move(logprobs));
}

}  // namespace

Result<json> openai_batch_line(const JobRow& job, const ItemRow& item,
                               const std::optional<ResultRow>& r, const OpenAiLineInputs& in) {
  const std::string key = item_key(job, item);
  json line = {{"id", "batch_req_" + key}, {"custom_id", item.custom_id}};
  if (item.state != ItemState::kDone || !r) {
    line["response"] = nullptr;
    line["error"] = error_of(item);
    return line;
  }
  NJ_ASSIGN_OR_RETURN(auto message, message_of(item, *r, in));
  const int64_t prompt = r->prompt_tokens, completion = r->output_tokens;
  json choice = {{"index", 0},
                 {"message", std::move(message.first)},
                 {"logprobs", std::move(message.second)},
                 {"finish_reason", r->finish_reason}};
  json body = {{"id", "chatcmpl-nj-" + key},
               {"object", "chat.completion"},
               {"created", static_cast<int64_t>(std::floor(r->created_at))},
               {"model", std::filesystem::path(job.model_dir).filename().string()},
               {"choices", json::array({choice})},
               {"usage",
                {{"prompt_tokens", prompt},
                 {"completion_tokens", completion},
                 {"total_tokens", prompt + completion}}}};
  line["response"] = {{"status_code", 200}, {"request_id", "nj-" + key}, {"body", body}};
  line["error"] = nullptr;
  return line;
}

Result<std::string> openai_batch_text(JobStore& store, const JobRow& job,
                                      const std::vector<ItemRow>& items) {
  std::optional<Tokenizer> tok;
  Status tok_status = not_found(job.model_dir + " has no tokenizer");
  if (Tokenizer::exists_in(job.model_dir)) {
    auto t = Tokenizer::load(job.model_dir);
    if (t.ok())
      tok.emplace(std::move(*t));
    else
      tok_status = t.status();
  }
  std::string text;
  for (const ItemRow& item : items) {
    NJ_ASSIGN_OR_RETURN(std::optional<ResultRow> r, store.result(item.id));
    std::optional<std::vector<TokenLogprobs>> logprobs;
    if (r && asks_for_logprobs(item)) {
      NJ_ASSIGN_OR_RETURN(std::vector<TokenLogprobs> stored, store.token_logprobs(item.id));
      logprobs = std::move(stored);
    }
    OpenAiLineInputs in{tok ? &*tok : nullptr, logprobs ? &*logprobs : nullptr};
    auto line = openai_batch_line(job, item, r, in);
    if (!line.ok() && !tok)
      return line.status().with_context("job " + std::to_string(job.id) + ": " +
                                        tok_status.message());
    if (!line.ok()) return line.status().with_context("job " + std::to_string(job.id));
    text += line->dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  return text;
}

}  // namespace nj::runner
