// Job spec parsing: values, defaults and overrides, path resolution, and positioned errors.
#include "jobs/spec/spec_parser.h"

#include <catch2/catch.hpp>

#include "jobs/spec/spec_model.h"

namespace nj::jobs {
namespace {

const char* const kGood = R"(name: nightly
model: ../models/k3
memory: 8GiB
kind: generate
max_attempts: 5
priority: -2
defaults: {max_tokens: 32, temperature: 0.5, seed: 7}
items:
  - id: doc-001
    prompt_ids: [3, 7, 11]
  - id: doc-002
    prompt: "Once upon a time"
    max_tokens: 128
    temperature: 0
    top_k: 40
    top_p: 0.9
    seed: 18446744073709551615
    ignore_eos: true
)";

TEST_CASE("a valid spec parses with defaults, per-item overrides and a resolved model path",
          "[jobs][spec]") {
  auto spec = parse_job_spec(kGood, "night.yaml", "/data/specs");
  REQUIRE(spec.ok());
  CHECK(spec->name == "nightly");
  CHECK(spec->model_dir == "/data/models/k3");
  CHECK(spec->model_where == "night.yaml:2:8");
  CHECK(spec->memory_bytes == std::optional<uint64_t>(8ull << 30));
  CHECK(spec->max_attempts == 5);
  CHECK(spec->priority == -2);
  REQUIRE(spec->items.size() == 2);
  const ItemSpec& a = spec->items[0];
  CHECK(a.id == "doc-001");
  CHECK(a.prompt_ids == std::vector<int32_t>{3, 7, 11});
  CHECK(!a.prompt_text);
  CHECK(a.params.max_tokens == 32);
  CHECK(a.params.sampling.temperature == 0.5f);
  CHECK(a.params.sampling.seed == 7);
  const ItemSpec& b = spec->items[1];
  CHECK(b.prompt_text == std::optional<std::string>("Once upon a time"));
  CHECK(b.prompt_where == "night.yaml:12:13");
  CHECK(b.params.max_tokens == 128);
  CHECK(b.params.sampling.temperature == 0.0f);
  CHECK(b.params.sampling.top_k == 40);
  CHECK(b.params.sampling.top_p == 0.9f);
  CHECK(b.params.sampling.seed == 18446744073709551615ull);
  CHECK(b.params.ignore_eos);
  CHECK_FALSE(a.params.ignore_eos);
}

TEST_CASE("absent optional keys take their documented defaults", "[jobs][spec]") {
  auto spec = parse_job_spec(
      "name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1]}\n", "s.yaml", "/");
  REQUIRE(spec.ok());
  CHECK(spec->max_attempts == 3);
  CHECK(spec->priority == 0);
  CHECK(!spec->memory_bytes);
  const GenerateParams& p = spec->items[0].params;
  CHECK(p.max_tokens == 64);
  CHECK(p.sampling.temperature == 0.0f);
  CHECK(p.sampling.top_k == 0);
  CHECK(p.sampling.top_p == 1.0f);
  CHECK(p.sampling.seed == 0);
}

TEST_CASE("every spec error names the file, line and column of the offending text",
          "[jobs][spec]") {
  struct Case {
    const char* text;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"name: x\nmodel: /m\nkind: generate\nitems: [\n", "s.yaml:5:1",
       "end of sequence flow not found"},
      {"name: x\nmodel: /m\nkind: generate\nextra: 1\nitems:\n  - {id: a, prompt_ids: [1]}\n",
       "s.yaml:4:1",
       "unknown key 'extra' (known: defaults, items, kind, max_attempts, memory, model, name, "
       "priority, speculative)"},
      {"name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1]}\n  - {id: a, "
       "prompt_ids: [2]}\n",
       "s.yaml:6:10", "items[1].id: duplicate id 'a' (first used at line 5)"},
      {"name: x\nmodel: /m\nkind: generate\nitems: []\n", "s.yaml:4:8",
       "items: the job has no items"},
      {"name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a}\n", "s.yaml:5:5",
       "items[0]: missing 'prompt' (text) or 'prompt_ids'"},
      {"name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1, -4]}\n",
       "s.yaml:5:29", "items[0].prompt_ids[1]: -4 is out of range"},
      {"name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1], max_tokens: 0}\n",
       "s.yaml:5:42", "items[0].max_tokens: 0 is out of range [1, 1048576]"},
      {"name: x\nmodel: /m\nkind: generate\ndefaults: {top_p: 0}\nitems:\n  - {id: a, prompt_ids: "
       "[1]}\n",
       "s.yaml:4:19", "defaults.top_p: must be greater than 0"},
      {"name: x\nmodel: /m\nkind: generate\ndefaults: {seed: -1}\nitems:\n  - {id: a, prompt_ids: "
       "[1]}\n",
       "s.yaml:4:18", "defaults.seed: expected a whole number >= 0"},
      {"name: x\nmodel: /m\nkind: generate\ndefaults: {ignore_eos: maybe}\nitems:\n  - {id: a, "
       "prompt_ids: [1]}\n",
       "s.yaml:4:24", "defaults.ignore_eos: expected true or false, got 'maybe'"},
      {"name: x\nmodel: /m\nkind: generate\nmemory: lots\nitems:\n  - {id: a, prompt_ids: [1]}\n",
       "s.yaml:4:9", "memory: "},
      {"name: x\nmodel: /m\nkind: summarize\nitems:\n  - {id: a, prompt_ids: [1]}\n", "s.yaml:3:7",
       "kind: unknown kind 'summarize' (known: classify, generate)"},
      {"model: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1]}\n", "s.yaml:1:1",
       "missing required key 'name'"},
      {"name: [x]\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1]}\n", "s.yaml:1:7",
       "name: expected text, got a list"},
      {"- just\n- a list\n", "s.yaml:1:1", "expected a mapping"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto spec = parse_job_spec(c.text, "s.yaml", "/");
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().code() == StatusCode::kInvalidArgument);
    const std::string& m = spec.status().message();
    INFO(m);
    CHECK(m.rfind(std::string(c.where) + ": ", 0) == 0);
    CHECK(m.find(c.what) != std::string::npos);
  }
}

TEST_CASE("all errors of a spec are reported, one per line", "[jobs][spec]") {
  auto spec = parse_job_spec(
      "name: x\nname: y\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt: t, prompt_ids: "
      "[1]}\n"
      "  - {idd: b, prompt_ids: [1]}\n",
      "s.yaml", "/");
  REQUIRE_FALSE(spec.ok());
  const std::string& m = spec.status().message();
  INFO(m);
  CHECK(m.find("s.yaml:2:1: duplicate key 'name'") != std::string::npos);
  CHECK(m.find("s.yaml:6:36: items[0].prompt_ids: give either") != std::string::npos);
  CHECK(m.find("s.yaml:7:5: items[1]: missing required key 'id'") != std::string::npos);
  CHECK(m.find("s.yaml:7:6: items[1]: unknown key 'idd'") != std::string::npos);
}

TEST_CASE("an empty spec and a missing file are clear errors", "[jobs][spec]") {
  auto empty = parse_job_spec("", "e.yaml", "/");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message().find("e.yaml: the spec is empty") == 0);
  auto missing = load_job_spec("/nonexistent/nightjar/spec.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("/nonexistent/nightjar/spec.yaml") != std::string::npos);
}

TEST_CASE("item settings round-trip through their stored JSON form", "[jobs][spec]") {
  GenerateParams p;
  p.max_tokens = 99;
  p.sampling = {0.25f, 3, 0.5f, 1ull << 63};
  p.ignore_eos = true;
  auto back = generate_params_from_json(nlohmann::json::parse(generate_params_to_json(p).dump()));
  REQUIRE(back.ok());
  CHECK(back->max_tokens == 99);
  CHECK(back->sampling.temperature == 0.25f);
  CHECK(back->sampling.top_k == 3);
  CHECK(back->sampling.top_p == 0.5f);
  CHECK(back->sampling.seed == (1ull << 63));
  CHECK(back->ignore_eos);
  CHECK_FALSE(generate_params_from_json(nlohmann::json::parse(R"({"max_tokens": 1})")).ok());
  CHECK_FALSE(generate_params_from_json(
                  nlohmann::json::parse(
                      R"({"max_tokens": 1, "temperature": -1, "top_k": 0, "top_p": 1, "seed": 0})"))
                  .ok());
}

TEST_CASE("checks against the model config: vocabulary range and text prompts", "[jobs][spec]") {
  auto spec = parse_job_spec(
      "name: x\nmodel: /m\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1, 300]}\n"
      "  - {id: b, prompt: hello}\n  - {id: c, prompt_ids: [255]}\n",
      "s.yaml", "/");
  REQUIRE(spec.ok());
  ModelConfig config;
  config.vocab = 256;
  Status s = check_spec_against_model(*spec, config, nullptr);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(s.message().find("s.yaml:5:25: items[0].prompt_ids[1]: token id 300 is outside the model's "
                         "vocabulary (size 256)") != std::string::npos);
  CHECK(s.message().find("s.yaml:6:21: items[1].prompt: text prompts need the model's tokenizer, "
                         "and /m has none") != std::string::npos);
  CHECK(s.message().find("items[2]") == std::string::npos);
}

TEST_CASE("a model directory without config.json is reported at the model key", "[jobs][spec]") {
  auto spec = parse_job_spec(
      "name: x\nmodel: /nonexistent/model\nkind: generate\nitems:\n  - {id: a, prompt_ids: [1]}\n",
      "s.yaml", "/");
  REQUIRE(spec.ok());
  Status s = bind_spec_to_model(*spec);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().rfind("s.yaml:2:8: model: /nonexistent/model", 0) == 0);
}

}  // namespace
}  // namespace nj::jobs

namespace nj::jobs {
namespace {

TEST_CASE("speculative: is auto by default, or off or ngram when given, other modes are refused",
          "[jobs][spec]") {
  const std::string head = "name: x\nmodel: /m\nkind: generate\n";
  const std::string items = "items:\n  - {id: a, prompt_ids: [1]}\n";
  auto plain = parse_job_spec(head + items, "s.yaml", "/");
  REQUIRE(plain.ok());
  CHECK(plain->speculative == SpeculativeMode::kAuto);
  CHECK(job_settings_to_json(*plain)["speculative"] == "auto");
  for (const char* mode : {"off", "auto", "ngram"}) {
    auto spec = parse_job_spec(head + "speculative: " + mode + "\n" + items, "s.yaml", "/");
    REQUIRE(spec.ok());
    CHECK(speculative_mode_name(spec->speculative) == std::string(mode));
    CHECK(job_settings_to_json(*spec)["speculative"] == mode);
  }
  auto bad = parse_job_spec(head + "speculative: always\n" + items, "s.yaml", "/");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(
      bad.status().message(),
      Catch::Contains("s.yaml:4:14: speculative: unknown mode 'always' (known: auto, ngram, off)"));
}

}  // namespace
}  // namespace nj::jobs
