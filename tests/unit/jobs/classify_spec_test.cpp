// The classify kind's spec keys: template, labels, inputs (glob, jsonl), items, outputs, and
// their positioned errors (no model needed).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "jobs/spec/label_trie.h"
#include "jobs/spec/spec_model.h"
#include "jobs/spec/spec_parser.h"

namespace nj::jobs {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test work dir holding `files` (name -> contents).
std::string make_dir(const std::string& name,
                     std::initializer_list<std::pair<std::string, std::string>> files) {
  const fs::path dir = fs::path(NJ_TEST_WORK_DIR) / "classify_spec" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& [file, text] : files) {
    fs::create_directories((dir / file).parent_path());
    std::ofstream(dir / file) << text;
  }
  return dir.string();
}

std::string spec_text(const std::string& body) {
  return "name: triage\nmodel: ../models/demo\nkind: classify\n" + body;
}

const char* const kTemplate =
    "template: |\n"
    "  Classify the ticket as one of: {labels}.\n"
    "  Ticket: {document}\n"
    "  Label:\n"
    "labels: [billing, bug, feature request, other]\n";

Result<JobSpec> parse(const std::string& body, const std::string& dir = "/tmp") {
  return parse_job_spec(spec_text(body), "triage.yaml", dir);
}

std::string error_of(const Result<JobSpec>& r) {
  REQUIRE_FALSE(r.ok());
  return r.status().message();
}

TEST_CASE("a classify spec with inline items parses its template, labels and outputs",
          "[jobs][spec][classify]") {
  auto spec = parse(std::string(kTemplate) +
                        "items:\n  - {id: t1, document: \"My card was charged twice.\"}\n"
                        "  - {id: t2, document: \"The app crashes.\"}\n"
                        "outputs: {jsonl: results/t.jsonl, csv: results/t.csv}\n",
                    "/data/specs");
  REQUIRE(spec.ok());
  CHECK(spec->kind == JobKind::kClassify);
  REQUIRE(spec->classify);
  const ClassifySpec& c = *spec->classify;
  CHECK(c.labels == std::vector<std::string>{"billing", "bug", "feature request", "other"});
  CHECK(c.prefix_text ==
        "Classify the ticket as one of: billing, bug, feature request, other.\nTicket: ");
  CHECK(c.suffix_text == "\nLabel:");
  CHECK(c.output_jsonl == std::optional<std::string>("/data/specs/results/t.jsonl"));
  CHECK(c.output_csv == std::optional<std::string>("/data/specs/results/t.csv"));
  REQUIRE(spec->items.size() == 2);
  CHECK(spec->items[0].id == "t1");
  CHECK(spec->items[0].document == std::optional<std::string>("My card was charged twice."));
  CHECK(c.label_wheres[2] == "triage.yaml:8:24");
}

TEST_CASE("inputs.glob reads the matching files sorted, ids relative to the spec",
          "[jobs][spec][classify]") {
  const std::string dir = make_dir("glob", {{"tickets/b.txt", "second"},
                                            {"tickets/a.txt", "first"},
                                            {"tickets/notes.md", "not a ticket"}});
  auto spec = parse(std::string(kTemplate) + "inputs: {glob: \"tickets/*.txt\"}\n", dir);
  REQUIRE(spec.ok());
  REQUIRE(spec->items.size() == 2);
  CHECK(spec->items[0].id == "tickets/a.txt");
  CHECK(spec->items[0].document == std::optional<std::string>("first"));
  CHECK(spec->items[1].id == "tickets/b.txt");
}

TEST_CASE("inputs.jsonl reads id and text fields, errors carry the line number",
          "[jobs][spec][classify]") {
  const std::string dir = make_dir(
      "jsonl",
      {{"docs.jsonl", "{\"key\": \"a\", \"body\": \"one\"}\n\n{\"key\": 7, \"body\": \"two\"}\n"},
       {"bad.jsonl", "{\"id\": \"a\", \"text\": \"one\"}\n{\"id\": \"b\"}\nnot json\n"}});
  auto spec = parse(
      std::string(kTemplate) + "inputs: {jsonl: docs.jsonl, id_field: key, text_field: body}\n",
      dir);
  REQUIRE(spec.ok());
  REQUIRE(spec->items.size() == 2);
  CHECK(spec->items[1].id == "7");
  CHECK(spec->items[1].document == std::optional<std::string>("two"));
  const std::string e =
      error_of(parse(std::string(kTemplate) + "inputs: {jsonl: bad.jsonl}\n", dir));
  CHECK_THAT(e,
             Catch::Contains("triage.yaml:9:17: inputs.jsonl: bad.jsonl:2: missing field 'text'"));
  CHECK_THAT(e, Catch::Contains("bad.jsonl:3: not a JSON object"));
}

TEST_CASE("classify spec errors are positioned and reported together", "[jobs][spec][classify]") {
  const std::string dir = make_dir("errors", {});
  const std::string e =
      error_of(parse("template: \"Ticket: {ticket}\"\n"
                     "labels: [bug, \"\", bug, \" padded\"]\n"
                     "inputs: {glob: \"none/*.txt\"}\n"
                     "defaults: {max_tokens: 3}\n",
                     dir));
  CHECK_THAT(e, Catch::Contains("triage.yaml:4:11: template: unknown placeholder '{ticket}'"));
  CHECK_THAT(e, Catch::Contains("triage.yaml:5:15: labels[1]: a label must not be empty"));
  CHECK_THAT(
      e, Catch::Contains("triage.yaml:5:19: labels[2]: duplicate label 'bug' (first at line 5)"));
  CHECK_THAT(e, Catch::Contains("labels[3]: a label must not start or end with whitespace"));
  CHECK_THAT(e, Catch::Contains("triage.yaml:6:16: inputs.glob: 'none/*.txt' matches no files"));
  CHECK_THAT(e, Catch::Contains("triage.yaml:7:11: defaults: only for kind generate"));
  CHECK_THAT(
      error_of(parse("template: \"{labels}\"\nlabels: [a]\nitems: [{id: x, document: y}]\n")),
      Catch::Contains("template: the template has no {document} placeholder"));
  CHECK_THAT(
      error_of(parse("template: \"{document}\"\nlabels: []\nitems: [{id: x, document: y}]\n")),
      Catch::Contains("labels: expected a non-empty list"));
  CHECK_THAT(error_of(parse(std::string(kTemplate))), Catch::Contains("missing the documents"));
  CHECK_THAT(error_of(parse(std::string(kTemplate) +
                            "items: [{id: x, prompt: y}]\ninputs: {glob: \"*.txt\"}\n")),
             Catch::Contains("give either 'inputs' or 'items', not both"));
  CHECK_THAT(error_of(parse(std::string(kTemplate) + "items: [{id: x, prompt: y}]\n")),
             Catch::Contains("items[0]: unknown key 'prompt'"));
}

TEST_CASE("classify keys in a generate spec name the kind they belong to",
          "[jobs][spec][classify]") {
  auto r = parse_job_spec(
      "name: g\nmodel: m\nkind: generate\nlabels: [a]\nitems: [{id: x, prompt_ids: [1]}]\n",
      "g.yaml", "/tmp");
  CHECK_THAT(error_of(r), Catch::Contains("g.yaml:4:9: labels: only for kind classify"));
}

TEST_CASE(
    "binding a classify spec tokenizes prefix, documents + suffix and labels after the suffix",
    "[jobs][spec][classify]") {
  auto tok = Tokenizer::load(NJ_TEST_TOKENIZER_DIR);
  REQUIRE(tok.ok());
  ModelConfig config;
  config.vocab = tok->vocab_size();
  auto spec = parse(std::string(kTemplate) + "items:\n  - {id: t1, document: \"It crashes.\"}\n");
  REQUIRE(spec.ok());
  REQUIRE(check_spec_against_model(*spec, config, &*tok).ok());
  const ClassifySpec& c = *spec->classify;
  CHECK(c.prefix_ids == tok->encode(c.prefix_text));
  CHECK(c.suffix_ids == tok->encode("\nLabel:"));
  std::vector<int32_t> prompt = tok->encode("It crashes.");
  prompt.insert(prompt.end(), c.suffix_ids.begin(), c.suffix_ids.end());
  CHECK(spec->items[0].prompt_ids == prompt);
  for (size_t i = 0; i < c.labels.size(); ++i) {
    std::vector<int32_t> full = c.suffix_ids;
    full.insert(full.end(), c.label_ids[i].begin(), c.label_ids[i].end());
    CHECK(full == tok->encode("\nLabel: " + c.labels[i]));
    CHECK(tok->decode(c.label_ids[i]) == " " + c.labels[i]);
  }
  CHECK(LabelTrie::build(c.label_ids, c.labels).ok());
  nlohmann::json settings = job_settings_to_json(*spec);
  auto back = classify_settings_from_json(settings);
  REQUIRE(back.ok());
  CHECK(back->label_ids == c.label_ids);
  CHECK(back->prefix_ids == c.prefix_ids);
  CHECK(settings["max_context"] ==
        c.prefix_ids.size() + prompt.size() +
            std::max_element(c.label_ids.begin(), c.label_ids.end(),
                             [](const auto& a, const auto& b) { return a.size() < b.size(); })
                ->size());

  auto prefixed = parse(
      "template: \"{document}\\nLabel:\"\nlabels: [bug, bug report]\n"
      "items: [{id: x, document: y}]\n");
  REQUIRE(prefixed.ok());
  Status s = check_spec_against_model(*prefixed, config, &*tok);
  CHECK_THAT(s.message(), Catch::Contains("label 'bug' is a token prefix of label 'bug report'"));
  auto none = parse(std::string(kTemplate) + "items: [{id: x, document: y}]\n");
  REQUIRE(none.ok());
  CHECK_THAT(check_spec_against_model(*none, config, nullptr).message(),
             Catch::Contains("classify jobs need the model's tokenizer"));
}

}  // namespace
}  // namespace nj::jobs
