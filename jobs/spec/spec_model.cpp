// Spec-against-model checks: model directory, text prompts, vocabulary range; for classify
// the template, label and document tokens and the label trie.
#include "jobs/spec/spec_model.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/io/file.h"
#include "engine/runtime/model.h"
#include "engine/plan/planner.h"
#include "engine/runtime/model_plan.h"
#include "jobs/spec/label_trie.h"

namespace nj::jobs {
namespace {

Status join(const std::vector<std::string>& lines) {
  if (lines.empty()) return Status();
  std::string text;
  for (size_t i = 0; i < lines.size() && i < 20; ++i) text += (i ? "\n" : "") + lines[i];
  if (lines.size() > 20) text += "\n... and " + std::to_string(lines.size() - 20) + " more errors";
  return invalid_argument(text);
}

// The first id outside the vocabulary, or -1.
int32_t outside(const std::vector<int32_t>& ids, int32_t vocab) {
  for (int32_t id : ids)
    if (id >= vocab) return id;
  return -1;
}

std::string tail_of(const std::string& text) {
  return text.size() <= 24 ? text : "..." + text.substr(text.size() - 24);
}

// Tokenizes the template's parts, the labels (as " " + label after the suffix) and the
// documents (each followed by the suffix's tokens), and builds the label trie.
Status check_classify(JobSpec& spec, const ModelConfig& config, const Tokenizer* tokenizer) {
  ClassifySpec& c = *spec.classify;
  if (!tokenizer)
    return invalid_argument(spec.model_where + ": model: classify jobs need the model's tokenizer "
                            "(for the template, the documents and the labels), and " +
                            spec.model_dir + " has none (no " + Tokenizer::kRanksFile + ")");
  std::vector<std::string> errors;
  c.prefix_ids = tokenizer->encode(c.prefix_text);
  c.suffix_ids = tokenizer->encode(c.suffix_text);
  if (int32_t id = std::max(outside(c.prefix_ids, config.vocab), outside(c.suffix_ids, config.vocab));
      id >= 0)
    errors.push_back(c.template_where + ": template: token id " + std::to_string(id) +
                     " is outside the model's vocabulary (size " + std::to_string(config.vocab) + ")");
  c.label_ids.clear();
  for (size_t i = 0; i < c.labels.size(); ++i) {
    const std::string path = "labels[" + std::to_string(i) + "]";
    std::vector<int32_t> full = tokenizer->encode(c.suffix_text + " " + c.labels[i]);
    if (full.size() < c.suffix_ids.size() ||
        !std::equal(c.suffix_ids.begin(), c.suffix_ids.end(), full.begin())) {
      errors.push_back(c.label_wheres[i] + ": " + path + ": '" + c.labels[i] +
                       "' does not tokenize cleanly after the template's end '" +
                       tail_of(c.suffix_text) +
                       "' (the tokenizer merges across the boundary, changing the template's last "
                       "tokens); end the template with punctuation such as ':' or a newline");
      c.label_ids.emplace_back();
      continue;
    }
    c.label_ids.emplace_back(full.begin() + static_cast<long>(c.suffix_ids.size()), full.end());
    if (c.label_ids.back().empty())
      errors.push_back(c.label_wheres[i] + ": " + path + ": '" + c.labels[i] +
                       "' tokenizes to nothing after the template");
    else if (int32_t id = outside(c.label_ids.back(), config.vocab); id >= 0)
      errors.push_back(c.label_wheres[i] + ": " + path + ": token id " + std::to_string(id) +
                       " is outside the model's vocabulary");
  }
  if (errors.empty()) {
    auto trie = LabelTrie::build(c.label_ids, c.labels);
    if (!trie.ok())
      errors.push_back(c.label_wheres.front() + ": labels: " + trie.status().message());
  }
  for (size_t i = 0; i < spec.items.size(); ++i) {
    ItemSpec& item = spec.items[i];
    item.prompt_ids = tokenizer->encode(item.document.value_or(""));
    if (item.prompt_ids.empty()) {
      errors.push_back(item.prompt_where + ": document '" + item.id + "' encodes to no tokens");
      continue;
    }
    if (int32_t id = outside(item.prompt_ids, config.vocab); id >= 0) {
      errors.push_back(item.prompt_where + ": document '" + item.id + "': token id " +
                       std::to_string(id) + " is outside the model's vocabulary");
      continue;
    }
    item.prompt_ids.insert(item.prompt_ids.end(), c.suffix_ids.begin(), c.suffix_ids.end());
  }
  return join(errors);
}

// A positive limit of a JSON document's `key` (at the top level or under text_config), or
// nullopt. Values from 1e15 up are the "no limit" sentinels Hugging Face files use.
std::optional<int64_t> json_limit(const std::string& path, const char* key) {
  auto text = read_small_file(path, 16u << 20);
  if (!text.ok()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  for (const nlohmann::json* o : {&j, j.contains("text_config") ? &j["text_config"] : nullptr}) {
    if (!o || !o->is_object() || !o->contains(key)) continue;
    const nlohmann::json& v = (*o)[key];
    if (v.is_number() && v.get<double>() >= 1 && v.get<double>() < 1e15)
      return static_cast<int64_t>(v.get<double>());
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::pair<int64_t, std::string>> model_max_context(const std::string& dir) {
  std::optional<std::pair<int64_t, std::string>> out;
  if (auto v = json_limit(dir + "/config.json", "max_position_embeddings"))
    out = std::make_pair(*v, std::string("config.json max_position_embeddings"));
  if (auto v = json_limit(dir + "/tokenizer_config.json", "model_max_length");
      v && (!out || *v < out->first))
    out = std::make_pair(*v, std::string("tokenizer_config.json model_max_length"));
  return out;
}

Status check_job_fits_model(const JobSpec& spec) {
  std::vector<std::string> errors;
  if (auto limit = model_max_context(spec.model_dir)) {
    for (size_t i = 0; i < spec.items.size(); ++i) {
      const ItemSpec& item = spec.items[i];
      const int64_t context = item_max_context(spec, item);
      if (context <= limit->first) continue;
      errors.push_back(item.where + ": items[" + std::to_string(i) + "] '" + item.id +
                       "': its context of " + std::to_string(context) +
                       " tokens (prompt and output) is beyond the model's maximum of " +
                       std::to_string(limit->first) + " (" + limit->second + ")");
    }
  }
  if (spec.memory_bytes && errors.empty()) {
    std::string pack_warning;
    NJ_ASSIGN_OR_RETURN(ModelHeaders headers,
                        open_model_headers(spec.model_dir, /*use_pack=*/true, &pack_warning));
    // The plan `run` makes for one item of this job (engine/runtime/model_plan.h), so that
    // the minimum checked here is the one run plans for.
    ModelRequest request;
    request.memory_bytes = *spec.memory_bytes;
    request.classify = spec.classify.has_value();
    request.context = std::max<int64_t>(1, job_max_context(spec));
    request.batch = 1;
    auto plan = plan_model(*headers.layout, request);
    if (!plan.ok()) {
      if (plan.status().code() != StatusCode::kResourceExhausted) return plan.status();
      const std::string where = spec.memory_where.empty() ? spec.source : spec.memory_where;
      errors.push_back(where + ": memory: " + plan.status().message() +
                       " (for this job's longest context, " + std::to_string(request.context) +
                       " tokens)");
    }
  }
  return join(errors);
}

Status check_spec_against_model(JobSpec& spec, const ModelConfig& config,
                                const Tokenizer* tokenizer) {
  if (spec.classify) return check_classify(spec, config, tokenizer);
  std::vector<std::string> errors;
  for (size_t i = 0; i < spec.items.size(); ++i) {
    ItemSpec& item = spec.items[i];
    const std::string path = "items[" + std::to_string(i) + "]";
    if (item.prompt_text) {
      if (!tokenizer) {
        errors.push_back(item.prompt_where + ": " + path +
                         ".prompt: text prompts need the model's tokenizer, and " + spec.model_dir +
                         " has none (no " + Tokenizer::kRanksFile + "); give prompt_ids instead");
        continue;
      }
      item.prompt_ids = tokenizer->encode(*item.prompt_text);
      if (item.prompt_ids.empty()) {
        errors.push_back(item.prompt_where + ": " + path +
                         ".prompt: the text encodes to no tokens");
        continue;
      }
    }
    for (size_t k = 0; k < item.prompt_ids.size(); ++k) {
      if (item.prompt_ids[k] >= config.vocab) {
        errors.push_back(item.prompt_where + ": " + path + ".prompt" +
                         (item.prompt_text ? "" : "_ids[" + std::to_string(k) + "]") +
                         ": token id " + std::to_string(item.prompt_ids[k]) +
                         " is outside the model's vocabulary (size " +
                         std::to_string(config.vocab) + ")");
        break;
      }
    }
  }
  return join(errors);
}

Status bind_spec_to_model(JobSpec& spec) {
  auto config = load_model_config(spec.model_dir);
  if (!config.ok())
    return invalid_argument(spec.model_where + ": model: " + config.status().message());
  bool any_text = spec.classify.has_value();
  for (const auto& item : spec.items) any_text = any_text || item.prompt_text.has_value();
  std::optional<Tokenizer> tokenizer;
  if (any_text && Tokenizer::exists_in(spec.model_dir)) {
    auto loaded = Tokenizer::load(spec.model_dir);
    if (!loaded.ok())
      return invalid_argument(
          spec.model_where + ": model: its tokenizer cannot be read: " + loaded.status().message());
    tokenizer.emplace(std::move(*loaded));
  }
  NJ_RETURN_IF_ERROR(check_spec_against_model(spec, *config, tokenizer ? &*tokenizer : nullptr));
  return check_job_fits_model(spec);
}

}  // namespace nj::jobs
