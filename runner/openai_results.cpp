// OpenAI Batch API output lines (the shape is documented in openai_results.h).
#include "runner/openai_results.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "runner/result_record.h"

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
  if (!tok) return text ? json(*text) : json(nullptr);
  if (finish_reason == "stop" && !ids.empty() && ids.back() == tok->eos_id())
    ids = ids.first(ids.size() - 1);
  return tok->decode(ids);
}

// The line of a finished item.
json done_line(const std::string& key, const std::string& custom_id, const std::string& model,
               json content, const std::string& finish_reason, int64_t prompt, int64_t completion,
               double created_at) {
  json choice = {{"index", 0},
                 {"message", {{"role", "assistant"}, {"content", std::move(content)}}},
                 {"finish_reason", finish_reason}};
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

json openai_batch_line(const JobRow& job, const ItemRow& item, const std::optional<ResultRow>& r,
                       const Tokenizer* tok) {
  const std::string key = item_key(job, item);
  if (item.state != ItemState::kDone || !r) return error_line(key, item.custom_id, error_of(item));
  return done_line(key, item.custom_id, std::filesystem::path(job.model_dir).filename().string(),
                   content_of(r->output_ids, r->output_text, r->finish_reason, tok),
                   r->finish_reason, r->prompt_tokens, r->output_tokens, r->created_at);
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
  return done_line(key, custom_id, model_name, content_of(ids, text, finish_reason, tok),
                   finish_reason, record.value("prompt_tokens", int64_t{0}),
                   record.value("output_tokens", int64_t{0}), created);
}

Result<std::string> openai_batch_text(JobStore& store, const JobRow& job,
                                      const std::vector<ItemRow>& items) {
  std::optional<Tokenizer> tok;
  if (Tokenizer::exists_in(job.model_dir)) {
    if (auto t = Tokenizer::load(job.model_dir); t.ok()) tok.emplace(std::move(*t));
  }
  std::string text;
  for (const ItemRow& item : items) {
    NJ_ASSIGN_OR_RETURN(std::optional<ResultRow> r, store.result(item.id));
    text += openai_batch_line(job, item, r, tok ? &*tok : nullptr)
                .dump(-1, ' ', false, json::error_handler_t::replace) +
            "\n";
  }
  return text;
}

}  // namespace nj::runner
