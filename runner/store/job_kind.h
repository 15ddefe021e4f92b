// A stored job's kind as jobs::JobKind. The store keeps the kind as the text the spec named
// (jobs.kind), so that a store written by a newer nightjar, with kinds this one does not
// know, still opens and lists; code that acts on a kind asks here instead of comparing text.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jobs/spec/job_spec.h"
#include "runner/store/job_store.h"
#include "runner/store/job_label.h"
#include "runner/store/job_settings.h"

namespace nj::runner {

// The kind named `stored` ("generate", "classify"), or nullopt for one this nightjar does not
// know.
inline std::optional<jobs::JobKind> known_job_kind(const std::string& stored) {
  Result<jobs::JobKind> kind = jobs::parse_job_kind(stored);
  if (!kind.ok()) return std::nullopt;
  return *kind;
}

// Whether `job` is a classify job (its items are scored against labels; jobs/classify_spec.h).
inline bool is_classify(const JobRow& job) {
  return known_job_kind(job.kind) == jobs::JobKind::kClassify;
}

// The `speculative:` a job's settings record (jobs.settings, written by submit), as text:
// "auto" when the key is absent (classify jobs, and generate jobs submitted before it
// existed). The claim filter compares the same text in SQL (queue.cpp), so that a batch's
// items share one mode and its plan.
inline std::string stored_speculative_text(const JobRow& job) {
  return JobSettings::of(job).speculative_text();
}

// The speculative mode of a generate job (off for other kinds: the key does not apply).
// InvalidArgument naming the job for a mode this nightjar does not know.
inline Result<jobs::SpeculativeMode> stored_speculative_mode(const JobRow& job) {
  if (known_job_kind(job.kind) != jobs::JobKind::kGenerate) return jobs::SpeculativeMode::kOff;
  auto mode = jobs::parse_speculative_mode(stored_speculative_text(job));
  if (!mode.ok())
    return mode.status().with_context(job_label(job) + ": speculative");
  return *mode;
}

}  // namespace nj::runner
