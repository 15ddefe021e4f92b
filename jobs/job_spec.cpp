// Job kinds by name and the JSON form of the settings stored with jobs and items.
#include "jobs/job_spec.h"

#include <algorithm>

namespace nj::jobs {

const char* job_kind_name(JobKind kind) {
  switch (kind) {
    case JobKind::kGenerate:
      return "generate";
  }
  return "?";
}

Result<JobKind> parse_job_kind(const std::string& name) {
  if (name == "generate") return JobKind::kGenerate;
  return invalid_argument("unknown kind '" + name + "' (known: generate)");
}

nlohmann::json generate_params_to_json(const GenerateParams& p) {
  return {{"max_tokens", p.max_tokens}, {"temperature", p.sampling.temperature},
          {"top_k", p.sampling.top_k},  {"top_p", p.sampling.top_p},
          {"seed", p.sampling.seed},    {"ignore_eos", p.ignore_eos}};
}

Result<GenerateParams> generate_params_from_json(const nlohmann::json& j) {
  GenerateParams p;
  auto field = [&](const char* key, auto& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number())
      return invalid_argument(std::string("item parameters: '") + key +
                              "' missing or not a number");
    out = it->get<std::remove_reference_t<decltype(out)>>();
    return Status();
  };
  if (!j.is_object()) return invalid_argument("item parameters: not a JSON object");
  NJ_RETURN_IF_ERROR(field("max_tokens", p.max_tokens));
  NJ_RETURN_IF_ERROR(field("temperature", p.sampling.temperature));
  NJ_RETURN_IF_ERROR(field("top_k", p.sampling.top_k));
  NJ_RETURN_IF_ERROR(field("top_p", p.sampling.top_p));
  NJ_RETURN_IF_ERROR(field("seed", p.sampling.seed));
  if (auto it = j.find("ignore_eos"); it != j.end()) {
    if (!it->is_boolean())
      return invalid_argument("item parameters: 'ignore_eos' is not true or false");
    p.ignore_eos = it->get<bool>();
  }
  if (p.max_tokens < 1) return invalid_argument("item parameters: max_tokens < 1");
  NJ_RETURN_IF_ERROR(validate_sampling(p.sampling).with_context("item parameters"));
  return p;
}

int64_t job_max_context(const JobSpec& spec) {
  int64_t longest = 0;
  for (const auto& item : spec.items)
    longest = std::max<int64_t>(
        longest, static_cast<int64_t>(item.prompt_ids.size()) + item.params.max_tokens);
  return longest;
}

nlohmann::json job_settings_to_json(const JobSpec& spec) {
  nlohmann::json j = {{"name", spec.name},         {"kind", job_kind_name(spec.kind)},
                      {"model", spec.model_dir},   {"max_attempts", spec.max_attempts},
                      {"priority", spec.priority}, {"source", spec.source}};
  j["memory_bytes"] =
      spec.memory_bytes ? nlohmann::json(*spec.memory_bytes) : nlohmann::json(nullptr);
  j["max_context"] = job_max_context(spec);
  return j;
}

}  // namespace nj::jobs
