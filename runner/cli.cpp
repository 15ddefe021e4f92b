// Command-line entry: global flags, logging to stderr, subcommand dispatch, exit codes.
#include "runner/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "runner/commands.h"
#include "runner/exit_codes.h"

namespace nj::runner {
namespace {

void setup_logging(int verbosity) {
  auto logger = spdlog::stderr_color_mt("nightjar");
  logger->set_pattern("nightjar: %^%l%$: %v");
  spdlog::level::level_enum level = spdlog::level::info;
  if (verbosity >= 2)
    level = spdlog::level::trace;
  else if (verbosity == 1)
    level = spdlog::level::debug;
  else if (verbosity == -1)
    level = spdlog::level::warn;
  else if (verbosity <= -2)
    level = spdlog::level::err;
  logger->set_level(level);
  spdlog::set_default_logger(logger);
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"nightjar: run giant mixture-of-experts models as overnight batch jobs"};
  app.set_version_flag("--version", std::string("nightjar ") + NIGHTJAR_VERSION);
  app.fallthrough();  // global flags may follow the subcommand
  app.require_subcommand(1, 1);
  app.footer(kExitCodeHelp);

  GlobalOptions global;
  int verbose = 0, quiet = 0;
  app.add_flag("-v,--verbose", verbose, "More log detail on stderr (repeat for trace)");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr (repeat: errors only)");

  CommandTable table;
  add_doctor_command(app, global, table);
  add_generate_command(app, global, table);
  add_logits_command(app, global, table);
  add_plan_command(app, global, table);
  add_pack_command(app, global, table);
  add_tokenize_commands(app, global, table);
  add_submit_command(app, global, table);
  add_run_command(app, global, table);
  add_status_command(app, global, table);
  add_cancel_command(app, global, table);
  add_retry_command(app, global, table);
  add_results_command(app, global, table);
  add_validate_command(app, global, table);
  add_report_command(app, global, table);
  add_slurm_command(app, global, table);
  add_merge_command(app, global, table);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help / version / the parse error
    return rc == 0 ? kExitOk : kExitUsage;
  }
  global.verbosity = verbose - quiet;
  setup_logging(global.verbosity);

  for (auto& [sub, run] : table) {
    if (sub->parsed()) return run();
  }
  return kExitUsage;  // require_subcommand makes this unreachable
}

}  // namespace nj::runner
