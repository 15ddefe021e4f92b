// Job kinds by name and the JSON form of the settings stored with jobs and items.
#include "jobs/spec/job_spec.h"

#include <algorithm>

namespace nj::jobs {

const char* job_kind_name(JobKind kind) {
  switch (kind) {
    case JobKind::kGenerate:
      return "generate";
    case JobKind::kClassify:
      return "classify";
  }
  return "?";
}

const char* speculative_mode_name(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::kAuto:
      return "auto";
    case SpeculativeMode::kOff:
      return "off";
    case SpeculativeMode::kNgram:
      return "ngram";
  }
  return "?";
}

Result<SpeculativeMode> parse_speculative_mode(const std::string& name) {
  if (name == "auto") return SpeculativeMode::kAuto;
  if (name == "off") return SpeculativeMode::kOff;
  if (name == "ngram") return SpeculativeMode::kNgram;
  return invalid_argument("unknown mode '" + name + "' (known: auto, ngram, off)");
}

Result<JobKind> parse_job_kind(const std::string& name) {
  if (name == "generate") return JobKind::kGenerate;
  if (name == "classify") return JobKind::kClassify;
  return invalid_argument("unknown kind '" + name + "' (known: classify, generate)");
}

nlohmann::json generate_params_to_json(const GenerateParams& p) {
  nlohmann::json j = {{"max_tokens", p.max_tokens}, {"temperature", p.sampling.temperature},
                      {"top_k", p.sampling.top_k},  {"top_p", p.sampling.top_p},
                      {"seed", p.sampling.seed},    {"ignore_eos", p.ignore_eos}};
  if (p.chat) j["chat"] = chat_reply_to_json(*p.chat);
  if (p.logprobs) {
    j["logprobs"] = true;
    j["top_logprobs"] = p.top_logprobs;
  }
  return j;
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
  if (auto it = j.find("chat"); it != j.end()) {
    NJ_ASSIGN_OR_RETURN(ChatReplyOptions chat, chat_reply_from_json(*it));
    p.chat = std::move(chat);
  }
  if (auto it = j.find("logprobs"); it != j.end()) {
    if (!it->is_boolean())
      return invalid_argument("item parameters: 'logprobs' is not true or false");
    p.logprobs = it->get<bool>();
  }
  if (auto it = j.find("top_logprobs"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > kMaxTopLogprobs)
      return invalid_argument("item parameters: 'top_logprobs' is not a whole number in 0.." +
                              std::to_string(kMaxTopLogprobs));
    p.top_logprobs = it->get<int>();
  }
  if (p.max_tokens < 1) return invalid_argument("item parameters: max_tokens < 1");
  NJ_RETURN_IF_ERROR(validate_sampling(p.sampling).with_context("item parameters"));
  return p;
}

namespace {

int longest_label(const JobSpec& spec) {
  size_t longest = 0;
  if (spec.classify)
    for (const auto& ids : spec.classify->label_ids) longest = std::max(longest, ids.size());
  return static_cast<int>(longest);
}

}  // namespace

int64_t item_max_context(const JobSpec& spec, const ItemSpec& item) {
  const int64_t n = static_cast<int64_t>(item.prompt_ids.size());
  if (!spec.classify) return n + item.params.max_tokens;
  return static_cast<int64_t>(spec.classify->prefix_ids.size()) + n + longest_label(spec);
}

int64_t job_max_context(const JobSpec& spec) {
  int64_t longest = 0;
  for (const auto& item : spec.items) longest = std::max(longest, item_max_context(spec, item));
  return longest;
}

nlohmann::json item_params_to_json(const JobSpec& spec, const ItemSpec& item) {
  if (spec.classify) return {{"max_tokens", longest_label(spec)}};
  nlohmann::json j = generate_params_to_json(item.params);
  if (item.accepted_fields) j["accepted_fields"] = *item.accepted_fields;
  return j;
}

nlohmann::json openai_outputs_to_json(const OpenAiOutputs& o) {
  return {{"output_file", o.output_file},
          {"error_file", o.error_file ? nlohmann::json(*o.error_file) : nlohmann::json(nullptr)},
          {"rules", output_rules_to_json(o.rules)}};
}

Result<OpenAiOutputs> openai_outputs_from_json(const nlohmann::json& j) {
  OpenAiOutputs o;
  if (!j.is_object() || !j.contains("output_file") || !j["output_file"].is_string())
    return invalid_argument("job settings: openai_outputs.output_file missing or mistyped");
  o.output_file = j["output_file"].get<std::string>();
  if (auto it = j.find("error_file"); it != j.end() && !it->is_null()) {
    if (!it->is_string())
      return invalid_argument("job settings: openai_outputs.error_file mistyped");
    o.error_file = it->get<std::string>();
  }
  auto it = j.find("rules");
  if (it == j.end()) return invalid_argument("job settings: openai_outputs.rules missing");
  NJ_ASSIGN_OR_RETURN(o.rules, output_rules_from_json(*it));
  return o;
}

nlohmann::json classify_settings_to_json(const ClassifySpec& c) {
  nlohmann::json outputs = nlohmann::json::object();
  if (c.output_jsonl) outputs["jsonl"] = *c.output_jsonl;
  if (c.output_csv) outputs["csv"] = *c.output_csv;
  if (c.output_jsonl || c.output_csv) outputs["rules"] = output_rules_to_json(c.output_rules);
  return {{"template", c.template_text}, {"labels", c.labels},         {"label_ids", c.label_ids},
          {"prefix_ids", c.prefix_ids},  {"suffix_ids", c.suffix_ids}, {"outputs", outputs}};
}

Result<ClassifySettings> classify_settings_from_json(const nlohmann::json& job_settings) {
  auto bad = [](const std::string& what) {
    return invalid_argument("job settings: classify." + what + " missing or mistyped");
  };
  if (!job_settings.is_object() || !job_settings.contains("classify") ||
      !job_settings["classify"].is_object())
    return bad("(the classify part)");
  const nlohmann::json& c = job_settings["classify"];
  ClassifySettings s;
  try {
    s.labels = c.at("labels").get<std::vector<std::string>>();
    s.label_ids = c.at("label_ids").get<std::vector<std::vector<int32_t>>>();
    s.prefix_ids = c.at("prefix_ids").get<std::vector<int32_t>>();
    s.suffix_ids = c.at("suffix_ids").get<std::vector<int32_t>>();
    if (c.contains("outputs")) {
      const nlohmann::json& o = c["outputs"];
      if (o.contains("jsonl")) s.output_jsonl = o["jsonl"].get<std::string>();
      if (o.contains("csv")) s.output_csv = o["csv"].get<std::string>();
      if (o.contains("rules")) {
        auto rules = output_rules_from_json(o["rules"]);
        if (!rules.ok()) return bad("outputs.rules (" + rules.status().message() + ")");
        s.output_rules = std::move(*rules);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("* (") + e.what() + ")");
  }
  if (s.labels.empty() || s.labels.size() != s.label_ids.size()) return bad("labels");
  return s;
}

nlohmann::json job_settings_to_json(const JobSpec& spec) {
  nlohmann::json j = {{"name", spec.name},         {"kind", job_kind_name(spec.kind)},
                      {"model", spec.model_dir},   {"max_attempts", spec.max_attempts},
                      {"priority", spec.priority}, {"source", spec.source}};
  j["memory_bytes"] =
      spec.memory_bytes ? nlohmann::json(*spec.memory_bytes) : nlohmann::json(nullptr);
  j["max_context"] = job_max_context(spec);
  if (spec.classify) j["classify"] = classify_settings_to_json(*spec.classify);
  if (spec.kind == JobKind::kGenerate) j["speculative"] = speculative_mode_name(spec.speculative);
  if (spec.openai_outputs) j["openai_outputs"] = openai_outputs_to_json(*spec.openai_outputs);
  return j;
}

}  // namespace nj::jobs
