// `nightjar report` over several homes: `--home` repeated, or a Slurm array's directory
// (array_manifest.h) whose tasks each have a home. The parts of a job (the jobs of one name
// in the homes) make one report, so a night's array reads as one job.
#pragma once

#include <string>
#include <vector>

#include "engine/util/status.h"
#include "runner/report.h"

namespace nj::runner {

// One report from the parts of a job. Item counts, tokens, engine time and usage add up;
// the wall time runs from the earliest start to the latest finish. Items come in `order`
// (custom_ids in spec order) when it is not empty, and an id of `order` that no part holds
// counts as queued (its task has not queued it yet); otherwise in the parts' order.
// REQUIRES: !parts.empty().
JobReport combine_job_reports(std::vector<JobReport> parts, const std::vector<std::string>& order);

struct ReportSources {
  std::vector<std::string> homes;   // home directories (resolved)
  std::vector<std::string> arrays;  // array directories: every task's home
  std::vector<std::string> jobs;    // job ids or names (empty: every job)
};

// The reports of the jobs in the sources, one per job name. NotFound when a named job is in
// none of the homes, or an array directory has no manifest; store errors.
Result<std::vector<JobReport>> reports_over_homes(const ReportSources& sources);

// True when `path` is an array directory (holds array.json).
bool is_array_dir(const std::string& path);

}  // namespace nj::runner
