// Each command lives in its own runner/cmd_*.cpp and exposes one registration function
// that adds its subcommand and options to the app and records how to run it.
#pragma once

#include <utility>
#include <vector>

#include "runner/cli.h"

namespace nj::runner {

using CommandTable = std::vector<std::pair<CLI::App*, CommandFn>>;

void add_doctor_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_generate_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_logits_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_plan_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_pack_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
// `tokenize` and `detokenize`.
void add_tokenize_commands(CLI::App& app, const GlobalOptions& global, CommandTable& table);

// The job store commands (cmd_submit.cpp, cmd_run.cpp, cmd_status.cpp, cmd_results.cpp).
void add_submit_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_run_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_status_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_cancel_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_retry_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_results_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
// `validate` (cmd_validate.cpp) and `report` (cmd_report.cpp).
void add_validate_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_report_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
// Slurm arrays: `slurm` (cmd_slurm.cpp) and `merge` (cmd_merge.cpp).
void add_slurm_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);
void add_merge_command(CLI::App& app, const GlobalOptions& global, CommandTable& table);

}  // namespace nj::runner
