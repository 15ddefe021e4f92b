// OpenAI Batch API output lines (the shape is documented in openai_results.h).
#include "runner/openai_results.h"

#include <cmath>
#include <filesystem>
#include <string>

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
json content_of(const ResultRow& r, const Tokenizer* tok) {
  if (!tok) return r.output_text ? json(*r.output_text) : json(nullptr);
  std::span<const int32_t> ids(r.output_ids);
  if (r.finish_reason == "stop" && !ids.empty() && ids.back() == tok->eos_id())
    ids = ids.first(ids.size() - 1);
  return tok->decode(ids);
}

}  // namespace

json openai_batch_line(const JobRow& job, const ItemRow& item, const std::optional<ResultRow>& r,
                       const Tokenizer* tok) {
  const std::string key = item_key(job, item);
  json line = {{"id", "batch_req_" + key}, {"custom_id", item.custom_id}};
  if (item.state != ItemState::kDone || !r) {
    line["response"] = nullptr;
    line["error"] = error_of(item);
    return line;
  }
  const int64_t prompt = r->prompt_tokens, completion = r->output_tokens;
  // A classification's answer is its label, complete: the label's text (output_text, without
  // the space its tokens start with) and, as for a generation that ended on its own, "stop".
  const bool label = r->finish_reason == "label";
  json choice = {{"index", 0},
                 {"message",
                  {{"role", "assistant"},
                   {"content", label ? json(r->output_text.value_or("")) : content_of(*r, tok)}}},
                 {"finish_reason", label ? std::string("stop") : r->finish_reason}};
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
