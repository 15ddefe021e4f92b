// Command-line entry: global flags, logging to stderr, subcommand dispatch, exit codes.
#include "runner/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/output.h"

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

namespace {

// Whether the command line asks for `--output json` (looked at before parsing, so that a
// parse error is reported as JSON too).
bool wants_json(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--output=json" ||
        (arg == "--output" && i + 1 < argc && std::string(argv[i + 1]) == "json"))
      return true;
  }
  return false;
}

// Gives `home` (from --home before the subcommand) to the subcommand's own --home.
Status hand_home_to(CLI::App& sub, const std::string& home) {
  CLI::Option* opt = sub.get_option_no_throw("--home");
  if (!opt) return invalid_argument("'" + sub.get_name() + "' does not use a home");
  if (opt->count() > 0) {
    if (opt->as<std::string>() != home)
      return invalid_argument("given twice, as " + home + " and " + opt->as<std::string>());
    return Status();
  }
  opt->add_result(home);
  opt->run_callback();
  return Status();
}

}  // namespace

int run_cli(int argc, char** argv) {
  const bool json = wants_json(argc, argv);
  set_json_output(json);
  CLI::App app{"nightjar: run giant mixture-of-experts models as overnight batch jobs"};
  app.set_version_flag("--version", std::string("nightjar ") + NIGHTJAR_VERSION);
  app.fallthrough();  // global flags may follow the subcommand
  app.require_subcommand(1, 1);
  app.footer(kExitCodeHelp);

  GlobalOptions global;
  int verbose = 0, quiet = 0;
  app.add_flag("-v,--verbose", verbose, "More log detail on stderr (repeat for trace)");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr (repeat: errors only)");
  // --home also before the subcommand (`nightjar --home DIR status`): handed to the
  // subcommand's own --home after parsing.
  std::string home_before;
  app.add_option("--home", home_before,
                 "Home directory of the job store commands (also accepted after the subcommand)");

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
    if (rc == 0) return kExitOk;
    if (json) print_json({{"error", error_json(kExitUsage, e.what())}});
    return kExitUsage;
  }
  global.verbosity = verbose - quiet;
  setup_logging(global.verbosity);

  for (auto& [sub, run] : table) {
    if (!sub->parsed()) continue;
    if (!home_before.empty()) {
      if (Status s = hand_home_to(*sub, home_before); !s.ok())
        return report_usage_error("--home", s);
    }
    return run();
  }
  return kExitUsage;  // require_subcommand makes this unreachable
}

}  // namespace nj::runner
