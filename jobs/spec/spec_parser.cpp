// Job spec parsing: the common keys, then the kind's own keys (generate: defaults, items;
// classify: classify_spec.cpp).
#include "jobs/spec/spec_parser.h"

#include <filesystem>
#include <limits>
#include <map>

#include "engine/io/file.h"
#include "engine/util/units.h"
#include "jobs/spec/classify_spec.h"
#include "jobs/inputs/document_inputs.h"
#include "jobs/inputs/spec_reader.h"
#include "jobs/inputs/yaml_source.h"

namespace nj::jobs {
namespace {

constexpr int64_t kMaxTokensLimit = 1 << 20;
constexpr int64_t kMaxAttemptsLimit = 1000000;
constexpr int64_t kPriorityLimit = 1000000;

// Reads the generate settings present in `map` over `params` (defaults, then per item).
void read_generate_params(MapReader& map, GenerateParams& params) {
  if (auto v = map.integer("max_tokens", 1, kMaxTokensLimit, Need::kOptional))
    params.max_tokens = static_cast<int>(*v);
  if (auto v = map.number("temperature", 0, 1e6, Need::kOptional))
    params.sampling.temperature = static_cast<float>(*v);
  if (auto v = map.integer("top_k", 0, std::numeric_limits<int32_t>::max(), Need::kOptional))
    params.sampling.top_k = static_cast<int>(*v);
  if (auto v = map.number("top_p", 0, 1, Need::kOptional)) {
    if (*v <= 0)
      map.errors().add(*map.find("top_p"), map.key_path("top_p"), "must be greater than 0");
    else
      params.sampling.top_p = static_cast<float>(*v);
  }
  if (auto v = map.unsigned_integer("seed", Need::kOptional)) params.sampling.seed = *v;
  if (auto v = map.boolean("ignore_eos", Need::kOptional)) params.ignore_eos = *v;
}

void read_prompt(MapReader& item, ItemSpec& out) {
  auto text = item.find("prompt");
  auto ids = item.find("prompt_ids");
  SpecErrors& errors = item.errors();
  if (text && ids) {
    errors.add(*ids, item.key_path("prompt_ids"), "give either 'prompt' or 'prompt_ids', not both");
    return;
  }
  if (!text && !ids) {
    errors.add(item.node(), item.path(), "missing 'prompt' (text) or 'prompt_ids' (token ids)");
    return;
  }
  if (text) {
    out.prompt_where = errors.where(*text);
    if (!text->IsScalar() || text->Scalar().empty()) {
      errors.add(*text, item.key_path("prompt"), "expected non-empty text");
      return;
    }
    if (text->Scalar().size() > kMaxDocumentBytes) {
      errors.add(*text, item.key_path("prompt"),
                 document_too_large("the prompt", text->Scalar().size()));
      return;
    }
    out.prompt_text = text->Scalar();
    return;
  }
  out.prompt_where = errors.where(*ids);
  if (!ids->IsSequence() || ids->size() == 0) {
    errors.add(*ids, item.key_path("prompt_ids"),
               "expected a non-empty list of token ids, e.g. [3, 7, 11]");
    return;
  }
  for (size_t i = 0; i < ids->size(); ++i) {
    auto id =
        read_integer(errors, (*ids)[i], item.key_path("prompt_ids") + "[" + std::to_string(i) + "]",
                     0, std::numeric_limits<int32_t>::max());
    if (id) out.prompt_ids.push_back(static_cast<int32_t>(*id));
  }
}

// kind: generate — `defaults` and `items`.
void read_generate_kind(MapReader& top, JobSpec& spec) {
  SpecErrors& errors = top.errors();
  GenerateParams defaults;
  if (auto v = top.string("speculative", Need::kOptional)) {
    auto mode = parse_speculative_mode(*v);
    if (!mode.ok())
      errors.add(*top.find("speculative"), "speculative", mode.status().message());
    else
      spec.speculative = *mode;
  }
  if (auto node = top.find("defaults")) {
    MapReader map(errors, *node, "defaults");
    read_generate_params(map, defaults);
    map.report_unknown_keys();
  }
  auto items = top.find("items");
  if (!items) {
    errors.add(top.node(), "", "missing required key 'items'");
    return;
  }
  if (!items->IsSequence()) {
    errors.add(*items, "items", "expected a list of items (lines starting with '- ')");
    return;
  }
  if (items->size() == 0) {
    errors.add(*items, "items", "the job has no items (give at least one)");
    return;
  }
  std::map<std::string, int> first_line;  // id -> 1-based line of its first use
  for (size_t i = 0; i < items->size(); ++i) {
    const YAML::Node node = (*items)[i];
    MapReader item(errors, node, "items[" + std::to_string(i) + "]");
    if (!item.is_map()) continue;
    ItemSpec out;
    out.where = errors.where(node);
    out.params = defaults;
    if (auto id = item.string("id", Need::kRequired)) {
      if (id->empty()) {
        errors.add(*item.find("id"), item.key_path("id"), "must not be empty");
      } else {
        const int line = item.find("id")->Mark().line + 1;
        auto [it, fresh] = first_line.emplace(*id, line);
        if (!fresh)
          errors.add(
              *item.find("id"), item.key_path("id"),
              "duplicate id '" + *id + "' (first used at line " + std::to_string(it->second) + ")");
        out.id = *id;
      }
    }
    read_prompt(item, out);
    read_generate_params(item, out.params);
    item.report_unknown_keys();
    spec.items.push_back(std::move(out));
  }
}

std::string resolve_model_path(const std::string& model, const std::string& base_dir) {
  std::filesystem::path p(model);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  p = std::filesystem::absolute(p).lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

Result<JobSpec> parse_job_spec(const std::string& text, const std::string& name,
                               const std::string& base_dir) {
  NJ_ASSIGN_OR_RETURN(YAML::Node root, parse_yaml(text, name));
  SpecErrors errors(name);
  if (root.IsNull() || !root.IsDefined())
    return invalid_argument(name + ": the spec is empty (expected name, model, kind and items)");
  MapReader top(errors, root, "");
  if (!top.is_map()) return errors.status();

  JobSpec spec;
  spec.source = name;
  if (auto v = top.string("name", Need::kRequired)) {
    if (v->empty()) errors.add(*top.find("name"), "name", "must not be empty");
    spec.name = *v;
  }
  if (auto v = top.string("model", Need::kRequired)) {
    spec.model_where = errors.where(*top.find("model"));
    if (v->empty())
      errors.add(*top.find("model"), "model", "must not be empty");
    else
      spec.model_dir = resolve_model_path(*v, base_dir);
  }
  if (auto node = top.find("memory")) {
    spec.memory_where = errors.where(*node);
    if (!node->IsScalar()) {
      errors.add(*node, "memory", "expected a size such as 8GiB");
    } else {
      auto bytes = parse_bytes(node->Scalar());
      if (bytes.ok())
        spec.memory_bytes = *bytes;
      else
        errors.add(*node, "memory", bytes.status().message());
    }
  }
  if (auto v = top.integer("max_attempts", 1, kMaxAttemptsLimit, Need::kOptional))
    spec.max_attempts = static_cast<int>(*v);
  if (auto v = top.integer("priority", -kPriorityLimit, kPriorityLimit, Need::kOptional))
    spec.priority = static_cast<int>(*v);

  auto kind = top.string("kind", Need::kRequired);
  if (!kind) return errors.status();  // without a kind its keys are unknown: stop here
  auto parsed_kind = parse_job_kind(*kind);
  if (!parsed_kind.ok()) {
    errors.add(*top.find("kind"), "kind", parsed_kind.status().message());
    return errors.status();
  }
  spec.kind = *parsed_kind;
  switch (spec.kind) {
    case JobKind::kGenerate:
      read_generate_kind(top, spec);
      break;
    case JobKind::kClassify:
      read_classify_kind(top, spec, base_dir);
      break;
  }
  report_other_kind_keys(top, spec.kind);
  top.report_unknown_keys();
  if (!errors.empty()) return errors.status();
  return spec;
}

Result<JobSpec> load_job_spec(const std::string& path) {
  auto text = read_small_file(path, 64u << 20);
  if (!text.ok()) return text.status();
  std::filesystem::path base = std::filesystem::path(path).parent_path();
  if (base.empty()) base = ".";
  return parse_job_spec(*text, path, base.string());
}

}  // namespace nj::jobs
