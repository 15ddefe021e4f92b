// A job's settings as `run`, `plan`, `status` and `results` read them back: the JSON object
// submit stored with the job (jobs.settings, jobs::job_settings_to_json), parsed once and
// read through typed accessors, so that no caller parses the text or looks up its keys.
//
//   {"name", "kind", "model", ..., "max_context": N, "speculative": "auto|off|ngram",
//    "classify": {...}}                       (the keys this runner reads; others are kept)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jobs/spec/job_spec.h"
#include "runner/store/job_store.h"

namespace nj::runner {

class JobSettings {
 public:
  // Parses `settings_json`; text that is not JSON gives settings that are not an object.
  static JobSettings parse(const std::string& settings_json);
  static JobSettings of(const JobRow& job) { return parse(job.settings_json); }

  // Whether the stored text is a JSON object (a damaged store's may not be).
  bool is_object() const { return json_.is_object(); }

  // "max_context": the longest sequence of the job's items, recorded at submit; nullopt
  // when absent or not an integer.
  std::optional<int64_t> max_context() const;

  // "speculative" as text: "auto" when the key is absent (classify jobs, and generate jobs
  // submitted before it existed). The claim filter compares the same text in SQL
  // (queue.cpp).
  std::string speculative_text() const;

  // The classify part (jobs::classify_settings_from_json): InvalidArgument naming the field
  // when it is missing or malformed.
  Result<jobs::ClassifySettings> classify() const;

  // "openai_outputs" (jobs::openai_outputs_from_json): nullopt when the job has none;
  // InvalidArgument naming the field when malformed.
  Result<std::optional<jobs::OpenAiOutputs>> openai_outputs() const;

 private:
  explicit JobSettings(nlohmann::json json) : json_(std::move(json)) {}
  nlohmann::json json_;  // discarded (not an object) when the text did not parse
};

}  // namespace nj::runner
