// Result records (format in result_record.h).
#include "runner/results/result_record.h"

namespace nj::runner {

nlohmann::json result_record(const ItemRow& item, const std::optional<ResultRow>& r,
                             int64_t shared_prompt_tokens) {
  nlohmann::json j;
  j["custom_id"] = item.custom_id;
  j["status"] = item_state_name(item.state);
  j["error"] = item.last_error && item.state != ItemState::kDone ? nlohmann::json(*item.last_error)
                                                                 : nlohmann::json(nullptr);
  j["prompt_tokens"] =
      r ? r->prompt_tokens : static_cast<int64_t>(item.prompt_ids.size()) + shared_prompt_tokens;
  j["attempts"] = item.attempts;
  if (r) {
    j["output_ids"] = r->output_ids;
    if (r->output_text) j["output_text"] = *r->output_text;
    j["output_tokens"] = r->output_tokens;
    j["finish_reason"] = r->finish_reason;
  } else {
    j["output_ids"] = nullptr;
    j["output_tokens"] = item.tokens_done;
    j["finish_reason"] = nullptr;
  }
  nlohmann::json t = {{"prefill_s", item.prefill_s}, {"decode_s", item.decode_s}};
  t["started_at"] = item.started_at ? nlohmann::json(*item.started_at) : nlohmann::json(nullptr);
  t["finished_at"] = item.finished_at ? nlohmann::json(*item.finished_at) : nlohmann::json(nullptr);
  t["wall_s"] = item.started_at && item.finished_at
                    ? nlohmann::json(*item.finished_at - *item.started_at)
                    : nlohmann::json(nullptr);
  if (r && r->details_json) j["details"] = nlohmann::json::parse(*r->details_json, nullptr, false);
  j["timings"] = t;
  const EngineUsage& u = item.usage;
  j["engine"] = {
      {"io_wait_s", u.io_wait_s},
      {"compute_s", u.compute_s},
      {"bytes_read", u.bytes_read},
      {"tokens_fed", u.tokens_fed},
      {"decode_steps", u.decode_steps},
      {"max_batch", u.max_batch},
      {"speculation",
       {{"passes", u.spec_passes}, {"drafted", u.spec_drafted}, {"accepted", u.spec_accepted}}}};
  // A classification's schedule (run --schedule) and the documents that shared its sweep or
  // passes, from its details.
  if (j.contains("details") && j["details"].is_object() && j["details"].contains("schedule")) {
    j["engine"]["schedule"] = j["details"]["schedule"];
    j["engine"]["window"] = j["details"].value("window", nlohmann::json(nullptr));
  }
  j["engine"]["numerics_version"] =
      item.numerics_version ? nlohmann::json(*item.numerics_version) : nlohmann::json(nullptr);
  return j;
}

nlohmann::json record_answer(const nlohmann::json& record) {
  nlohmann::json answer = record;
  for (const char* key : {"attempts", "timings", "engine"}) answer.erase(key);
  return answer;
}

std::string record_error(const nlohmann::json& record) {
  const auto e = record.find("error");
  return e != record.end() && e->is_string() ? e->get<std::string>() : std::string();
}

}  // namespace nj::runner
