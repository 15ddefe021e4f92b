// JobSettings: a job's stored settings, typed (see job_settings.h).
#include "runner/store/job_settings.h"

namespace nj::runner {

JobSettings JobSettings::parse(const std::string& settings_json) {
  return JobSettings(nlohmann::json::parse(settings_json, nullptr, false));
}

std::optional<int64_t> JobSettings::max_context() const {
  if (json_.is_object() && json_.contains("max_context") &&
      json_["max_context"].is_number_integer())
    return json_["max_context"].get<int64_t>();
  return std::nullopt;
}

std::string JobSettings::speculative_text() const {
  if (json_.is_object() && json_.contains("speculative") && json_["speculative"].is_string())
    return json_["speculative"].get<std::string>();
  return "auto";
}

Result<jobs::ClassifySettings> JobSettings::classify() const {
  return jobs::classify_settings_from_json(json_);
}

Result<std::optional<jobs::OpenAiOutputs>> JobSettings::openai_outputs() const {
  if (!json_.is_object()) return std::optional<jobs::OpenAiOutputs>();
  auto it = json_.find("openai_outputs");
  if (it == json_.end() || it->is_null()) return std::optional<jobs::OpenAiOutputs>();
  NJ_ASSIGN_OR_RETURN(jobs::OpenAiOutputs o, jobs::openai_outputs_from_json(*it));
  return std::optional<jobs::OpenAiOutputs>(std::move(o));
}

}  // namespace nj::runner
