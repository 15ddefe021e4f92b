// Where a job may write the outputs its spec declares (`outputs: {jsonl, csv}`). A spec is
// input, often run unattended under a service account: a spec that names the job store, its
// own documents or a file elsewhere on the machine as an output is refused, not obeyed.
//
// The policy (README "Where outputs may go"):
//   1. An output resolves (symlinks followed, `..` applied) to a file inside the spec's
//      directory, or inside a directory given with `submit --allow-outputs DIR`.
//   2. Never inside a home: the home the job is submitted to, or any directory that holds
//      a job store, even when an allowed directory covers it.
//   3. Never the spec itself or one of the job's inputs (its JSON Lines file, or any file
//      its glob matches), and never the same file as the job's other output.
//   4. Checked at validate/submit (each error names the key and the resolved path; exit 3)
//      and again right before every write (runner/results/job_outputs.cpp): the file system may
//      change between the two (a symlink planted in the evening).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"

namespace nj::jobs {

struct JobSpec;

struct OutputRules {
  std::string spec_dir;                   // absolute; outputs may go below it
  std::vector<std::string> allowed_dirs;  // absolute; `submit --allow-outputs`
  std::vector<std::string> homes;         // absolute; never written below
  std::string store_file;                 // a directory holding this file is a home too
  std::string spec_file;                  // absolute; never written
  std::vector<std::string> input_files;   // absolute: a JSON Lines input; never written
  std::vector<std::string> input_globs;   // absolute glob(3) patterns of glob inputs
};

// Stored with the job (classify settings "outputs"."rules") for the check before writing.
nlohmann::json output_rules_to_json(const OutputRules& rules);
// InvalidArgument naming the field when `j` is mistyped.
Result<OutputRules> output_rules_from_json(const nlohmann::json& j);

// `path` made absolute, with every symlink followed (also a dangling one: its target, which
// may not exist yet) and `..` applied to what it follows, as the kernel resolves it. Never
// fails: what does not exist is taken as written; a loop stops after 40 links.
std::string resolve_path(const std::string& path);

// The home `path` would be written into, if any: one of `homes`, or the nearest directory
// above it that holds `store_file`. `path` is resolved first.
std::optional<std::string> home_containing(const std::string& path,
                                           const std::vector<std::string>& homes,
                                           const std::string& store_file);

// The resolved path when `rules` allow writing the output `path` (absolute); otherwise
// InvalidArgument saying which rule refuses it and naming the resolved path.
Result<std::string> check_output_path(const std::string& path, const OutputRules& rules);

// Checks the outputs `spec` declares (a classify spec; nothing to do otherwise) against the
// rules its spec file and inputs imply plus `allowed_dirs` and `homes`, and records those
// rules in spec.classify->output_rules. InvalidArgument listing every problem as
// "<spec>:<line>:<col>: outputs.<key>: <why>". `store_file` as in OutputRules.
Status check_declared_outputs(JobSpec& spec, const std::vector<std::string>& allowed_dirs,
                              const std::vector<std::string>& homes, const std::string& store_file);

// The OpenAI output (and error) file of `submit --openai-batch IN --output-file OUT
// [--error-file ERR]`, checked as rules 2-4 say (never in a home, never the input file, not
// the same file twice); their directories are allowed, since the command line names them
// (rule 1 guards against paths an input file names). Sets spec.openai_outputs with the
// rules recorded for the check before writing. InvalidArgument naming the flag and the
// resolved path.
Status check_openai_outputs(JobSpec& spec, const std::string& output_file,
                            const std::optional<std::string>& error_file,
                            const std::vector<std::string>& homes, const std::string& store_file);

}  // namespace nj::jobs
