// The classify kind's keys: template, labels, inputs (glob, jsonl) or items, outputs.
#include "jobs/spec/classify_spec.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <span>

#include "jobs/inputs/document_inputs.h"
#include "jobs/spec/prompt_template.h"

namespace nj::jobs {
namespace {

std::string absolute_path(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return std::filesystem::absolute(p).lexically_normal().string();
}

bool blank_at_ends(const std::string& s) {
  return std::isspace(static_cast<unsigned char>(s.front())) ||
         std::isspace(static_cast<unsigned char>(s.back()));
}

void read_labels(MapReader& top, ClassifySpec& c) {
  SpecErrors& errors = top.errors();
  auto node = top.find("labels");
  if (!node) {
    errors.add(top.node(), "", "missing required key 'labels' (the classes, e.g. [billing, bug])");
    return;
  }
  if (!node->IsSequence() || node->size() == 0) {
    errors.add(*node, "labels", "expected a non-empty list of labels, e.g. [billing, bug, other]");
    return;
  }
  std::map<std::string, int> first_line;
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node label = (*node)[i];
    const std::string path = "labels[" + std::to_string(i) + "]";
    if (!label.IsScalar()) {
      errors.add(label, path, "expected text");
      continue;
    }
    const std::string& text = label.Scalar();
    if (text.empty()) {
      errors.add(label, path, "a label must not be empty");
      continue;
    }
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      errors.add(label, path, "a label must not be blank: it would add no tokens to the prompt");
      continue;
    }
    if (blank_at_ends(text)) {
      errors.add(label, path,
                 "a label must not start or end with whitespace (each is scored as \" \" + "
                 "label after the prompt)");
      continue;
    }
    auto [it, fresh] = first_line.emplace(text, label.Mark().line + 1);
    if (!fresh) {
      errors.add(
          label, path,
          "duplicate label '" + text + "' (first at line " + std::to_string(it->second) + ")");
      continue;
    }
    c.labels.push_back(text);
    c.label_wheres.push_back(errors.where(label));
  }
}

void read_template(MapReader& top, ClassifySpec& c, bool labels_ok) {
  auto text = top.string("template", Need::kRequired);
  if (!text) return;
  const YAML::Node node = *top.find("template");
  c.template_text = *text;
  c.template_where = top.errors().where(node);
  auto expanded = expand_template(*text, c.labels);
  if (!expanded.ok()) {
    top.errors().add(node, "template", expanded.status().message());
    return;
  }
  if (!labels_ok) return;
  c.prefix_text = expanded->prefix;
  c.suffix_text = expanded->suffix;
}

void read_outputs(MapReader& top, ClassifySpec& c, const std::string& base_dir) {
  auto node = top.find("outputs");
  if (!node) return;
  MapReader map(top.errors(), *node, "outputs");
  if (!map.is_map()) return;
  auto path = [&](const char* key, std::string& where) -> std::optional<std::string> {
    auto v = map.string(key, Need::kOptional);
    if (!v) return std::nullopt;
    where = map.errors().where(*map.find(key));
    if (v->empty()) {
      map.errors().add(*map.find(key), map.key_path(key), "must not be empty");
      return std::nullopt;
    }
    return absolute_path(*v, base_dir);
  };
  c.output_jsonl = path("jsonl", c.output_jsonl_where);
  c.output_csv = path("csv", c.output_csv_where);
  map.report_unknown_keys();
}

// `inputs: {glob | jsonl [, id_field, text_field]}` into items.
void read_inputs(MapReader& top, const YAML::Node& node, JobSpec& spec, ClassifySpec& c,
                 const std::string& base_dir) {
  SpecErrors& errors = top.errors();
  MapReader map(errors, node, "inputs");
  if (!map.is_map()) return;
  auto glob = map.string("glob", Need::kOptional);
  auto jsonl = map.string("jsonl", Need::kOptional);
  auto id_field = map.string("id_field", Need::kOptional);
  auto text_field = map.string("text_field", Need::kOptional);
  map.report_unknown_keys();
  if (glob.has_value() == jsonl.has_value()) {
    errors.add(node, "inputs",
               "give exactly one of 'glob' (files) and 'jsonl' (a JSON Lines file)");
    return;
  }
  DocumentsRead read;
  std::string key;
  if (glob) {
    key = "glob";
    for (const char* k : {"id_field", "text_field"})
      if (auto v = map.find(k)) errors.add(*v, map.key_path(k), "only applies with 'jsonl'");
    read = read_glob_documents(*glob, base_dir);
    c.input_glob = absolute_path(*glob, base_dir);
  } else {
    key = "jsonl";
    read = read_jsonl_documents(*jsonl, base_dir, id_field.value_or("id"),
                                text_field.value_or("text"));
    c.input_jsonl = absolute_path(*jsonl, base_dir);
  }
  const YAML::Node at = *map.find(key);
  for (const std::string& e : read.errors) errors.add(at, "inputs." + key, e);
  std::map<std::string, std::string> seen;  // id -> where
  for (Document& d : read.documents) {
    auto [it, fresh] = seen.emplace(d.id, d.where);
    if (!fresh) {
      errors.add(at, "inputs." + key,
                 d.where + ": duplicate id '" + d.id + "' (first at " + it->second + ")");
      continue;
    }
    ItemSpec item;
    item.id = d.id;
    item.where = errors.where(at) + " (" + d.where + ")";
    item.prompt_where = item.where;
    item.document = std::move(d.text);
    spec.items.push_back(std::move(item));
  }
}

// Inline `items: [{id, document}]`.
void read_inline_items(MapReader& top, const YAML::Node& items, JobSpec& spec) {
  SpecErrors& errors = top.errors();
  if (!items.IsSequence() || items.size() == 0) {
    errors.add(items, "items", "expected a non-empty list of {id, document} items");
    return;
  }
  std::map<std::string, int> first_line;
  for (size_t i = 0; i < items.size(); ++i) {
    const YAML::Node node = items[i];
    MapReader item(errors, node, "items[" + std::to_string(i) + "]");
    if (!item.is_map()) continue;
    ItemSpec out;
    out.where = errors.where(node);
    if (auto id = item.string("id", Need::kRequired)) {
      if (id->empty()) {
        errors.add(*item.find("id"), item.key_path("id"), "must not be empty");
      } else {
        auto [it, fresh] = first_line.emplace(*id, item.find("id")->Mark().line + 1);
        if (!fresh)
          errors.add(
              *item.find("id"), item.key_path("id"),
              "duplicate id '" + *id + "' (first used at line " + std::to_string(it->second) + ")");
        out.id = *id;
      }
    }
    if (auto doc = item.string("document", Need::kRequired)) {
      out.prompt_where = errors.where(*item.find("document"));
      if (doc->empty())
        errors.add(*item.find("document"), item.key_path("document"), "must not be empty");
      else if (doc->size() > kMaxDocumentBytes)
        errors.add(*item.find("document"), item.key_path("document"),
                   document_too_large("the document", doc->size()));
      out.document = *doc;
    }
    item.report_unknown_keys();
    spec.items.push_back(std::move(out));
  }
}

}  // namespace

void read_classify_kind(MapReader& top, JobSpec& spec, const std::string& base_dir) {
  ClassifySpec c;
  c.spec_dir = std::filesystem::absolute(base_dir).lexically_normal().string();
  while (c.spec_dir.size() > 1 && c.spec_dir.back() == '/') c.spec_dir.pop_back();
  const size_t errors_before_labels = top.errors().count();
  read_labels(top, c);
  const bool labels_ok = top.errors().count() == errors_before_labels;
  read_template(top, c, labels_ok);
  read_outputs(top, c, base_dir);
  auto inputs = top.find("inputs");
  auto items = top.find("items");
  if (inputs && items)
    top.errors().add(*items, "items", "give either 'inputs' or 'items', not both");
  else if (!inputs && !items)
    top.errors().add(top.node(), "",
                     "missing the documents: give 'inputs' ({glob: ...} or {jsonl: ...}) or "
                     "'items' ([{id, document}, ...])");
  else if (inputs)
    read_inputs(top, *inputs, spec, c, base_dir);
  else
    read_inline_items(top, *items, spec);
  spec.classify = std::move(c);
}

void report_other_kind_keys(MapReader& top, JobKind kind) {
  static const char* const kGenerateOnly[] = {"defaults", "speculative"};
  static const char* const kClassifyOnly[] = {"template", "labels", "inputs", "outputs"};
  const bool classify = kind == JobKind::kClassify;
  for (const char* key : classify ? std::span<const char* const>(kGenerateOnly)
                                  : std::span<const char* const>(kClassifyOnly)) {
    // Marked known (so not also "unknown") only when present: "known: ..." lists this kind's.
    if (!top.is_map() || !top.node()[key]) continue;
    if (auto v = top.find(key))
      top.errors().add(*v, key,
                       std::string("only for kind ") + (classify ? "generate" : "classify") +
                           " (this job's kind is " + job_kind_name(kind) + ")");
  }
}

}  // namespace nj::jobs
