// How every message names a job: "job 3 (triage)", by its id and its name, so that a line in
// a log, an error or a warning says which job without a look-up (names may repeat; ids do
// not, and ids alone say nothing to the person who wrote the spec).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runner/store/job_store.h"
#include "runner/store/printable.h"

namespace nj::runner {

// "job 3 (triage)"; the name made printable() (a spec's name may hold control characters).
inline std::string job_label(int64_t id, std::string_view name) {
  return "job " + std::to_string(id) + " (" + printable(name) + ")";
}

inline std::string job_label(const JobRow& job) { return job_label(job.id, job.name); }

}  // namespace nj::runner
