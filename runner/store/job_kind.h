// A stored job's kind as jobs::JobKind. The store keeps the kind as the text the spec named
// (jobs.kind), so that a store written by a newer nightjar, with kinds this one does not
// know, still opens and lists; code that acts on a kind asks here instead of comparing text.
#pragma once

#include <optional>
#include <string>

#include "jobs/job_spec.h"
#include "runner/store/job_store.h"

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

}  // namespace nj::runner
