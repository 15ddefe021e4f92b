// OpenAI Batch API output lines (the shape is documented in openai_results.h).
#include "runner/results/openai_results.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "jobs/chat/chat_format.h"
#include "jobs/chat/chat_reply.h"
#include "runner/results/result_record.h"
#include "runner/store/job_label.h"

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

// The answer text: the output without its closing end-of-sequence token.
json content_of(std::span<const int32_t> ids, const std::optional<std::string>& text,
                const std::string& finish_reason, const Tokenizer* tok) {
  // A classification's answer is its label: the label's text (output_text, without the
  // space its tokens start with).
  if (finish_reason == "label") return json(text.value_or(""));
  if (!tok) return text ? json(*text) : json(nullptr);
  if (finish_reason == "stop" && !ids.empty() && ids.back() == tok->eos_id())
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
    message["content"] = content_of(r.output_ids, r.output_text, r.finish_reason, in.tok);
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

// The line of a finished item.
json done_line(const std::string& key, const std::string& custom_id, const std::string& model,
               json message, json logprobs, const std::string& finish_reason, int64_t prompt,
               int64_t completion, double created_at) {
  json choice = {{"index", 0},
                 {"message", std::move(message)},
                 {"logprobs", std::move(logprobs)},
                 // a label is complete, as a generation that ended on its own
                 {"finish_reason", finish_reason == "label" ? std::string("stop") : finish_reason}};
  json body = {{"id", "chatcmpl-nj-" + key},
               {"object", "chat.completion"},
               {"created", static_cast<int64_t>(std::floor(created_at))},
               {"model", model},
               {"choices", json::array({choice})},
               {"usage",
                {{"prompt_tokens", prompt},
                 {"completion_tokens", completion},
                 {"total_tokens", prompt + completion}}}};
  return {{"id", "batch_req_" + key},
          {"custom_id", custom_id},
          {"response", {{"status_code", 200}, {"request_id", "nj-" + key}, {"body", body}}},
          {"error", nullptr}};
}

json error_line(const std::string& key, const std::string& custom_id, json error) {
  return {{"id", "batch_req_" + key},
          {"custom_id", custom_id},
          {"response", nullptr},
          {"error", std::move(error)}};
}

}  // namespace

Result<json> openai_batch_line(const JobRow& job, const ItemRow& item,
                               const std::optional<ResultRow>& r, const OpenAiLineInputs& in) {
  const std::string key = item_key(job, item);
  if (item.state != ItemState::kDone || !r) return error_line(key, item.custom_id, error_of(item));
  NJ_ASSIGN_OR_RETURN(auto message, message_of(item, *r, in));
  return done_line(key, item.custom_id, std::filesystem::path(job.model_dir).filename().string(),
                   std::move(message.first), std::move(message.second), r->finish_reason,
                   r->prompt_tokens, r->output_tokens, r->created_at);
}

json openai_batch_line(const json& record, const std::string& key, const std::string& model_name,
                       const Tokenizer* tok) {
  const std::string custom_id = record.value("custom_id", "");
  const std::string status = record.value("status", "");
  const std::string error = record_error(record);
  if (status != "done") {
    if (status == "failed")
      return error_line(key, custom_id,
                        {{"code", "item_failed"},
                         {"message", error.empty() ? std::string("the item failed") : error}});
    if (status == "cancelled")
      return error_line(
          key, custom_id,
          {{"code", "item_cancelled"},
           {"message", "cancelled" + (error.empty() ? std::string() : " (" + error + ")")}});
    return error_line(
        key, custom_id,
        {{"code", "not_finished"},
         {"message", "the item is " + status + " (" +
                         std::to_string(record.value("output_tokens", 0)) + " tokens so far)"}});
  }
  const std::vector<int32_t> ids = record.value("output_ids", std::vector<int32_t>());
  std::optional<std::string> text;
  if (record.contains("output_text") && record["output_text"].is_string())
    text = record["output_text"].get<std::string>();
  const std::string finish_reason = record.value("finish_reason", "");
  double created = 0;
  if (const auto t = record.find("timings"); t != record.end() && t->is_object())
    if (const auto f = t->find("finished_at"); f != t->end() && f->is_number())
      created = f->get<double>();
  // A record carries no request parameters: its content is the plain output text (a chat
  // reply is not split into channels here) and it has no log-probabilities.
  json message = {{"role", "assistant"}, {"content", content_of(ids, text, finish_reason, tok)}};
  return done_line(key, custom_id, model_name, std::move(message), nullptr, finish_reason,
                   record.value("prompt_tokens", int64_t{0}),
                   record.value("output_tokens", int64_t{0}), created);
}

namespace {

// Every item's line, in spec order, handed to `emit`.
Status for_each_openai_line(JobStore& store, const JobRow& job, const std::vector<ItemRow>& items,
                            const std::function<void(const json&)>& emit) {
  std::optional<Tokenizer> tok;
  Status tok_status = not_found(job.model_dir + " has no tokenizer");
  if (Tokenizer::exists_in(job.model_dir)) {
    auto t = Tokenizer::load(job.model_dir);
    if (t.ok())
      tok.emplace(std::move(*t));
    else
      tok_status = t.status();
  }
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
      return line.status().with_context(job_label(job) + ": " + tok_status.message());
    if (!line.ok()) return line.status().with_context(job_label(job));
    emit(*line);
  }
  return Status();
}

std::string line_text(const json& line) {
  return line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

Result<std::string> openai_batch_text(JobStore& store, const JobRow& job,
                                      const std::vector<ItemRow>& items) {
  std::string text;
  NJ_RETURN_IF_ERROR(
      for_each_openai_line(store, job, items, [&](const json& line) { text += line_text(line); }));
  return text;
}

Result<OpenAiBatchFiles> openai_batch_files(JobStore& store, const JobRow& job,
                                            const std::vector<ItemRow>& items) {
  OpenAiBatchFiles files;
  NJ_RETURN_IF_ERROR(for_each_openai_line(store, job, items, [&](const json& line) {
    (line["response"].is_null() ? files.errors : files.output) += line_text(line);
  }));
  return files;
}

}  // namespace nj::runner
