// Command-line entry: global flags, logging to stderr, subcommand dispatch, exit codes.
#include "runner/cli/cli.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"

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

// Edit distance (insertions, deletions, substitutions), for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidate closest to `word` when it is close enough to be a typo (or `word` starts
// it: `--temp` for `--temperature`), else "".
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = c.rfind(word, 0) == 0 && word.size() >= 3 ? 1 : edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

// The long option names of `app` ("--temperature"), hidden ones left out.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_group().empty()) continue;
    for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

// A clearer message than CLI11's for a mistyped command or option: "did you mean", and the
// unexpected arguments in the order they were given. nullopt: keep CLI11's.
std::optional<std::string> explain_parse_error(CLI::App& app, int argc, char** argv,
                                               const CLI::ParseError& e) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    commands.push_back(sub->get_name());
  // The subcommand: the first word that is not an option or a global option's value. An
  // unknown option before it is named as such: its value would otherwise be taken for the
  // command (`nightjar --temp 0.5 generate`: "unknown command '0.5'").
  std::string command;
  size_t at = 0;
  for (; at < args.size(); ++at) {
    const std::string& w = args[at];
    if (w == "--home" || w == "--output") {
      ++at;
      continue;
    }
    if (!w.empty() && w[0] == '-') {
      const std::string name = w.substr(0, w.find('='));
      if (name == "-" || name == "--" || app.get_option_no_throw(name)) continue;
      if (name.size() > 2 && name[1] != '-') {  // -vq: global short flags together
        bool all_known = true;
        for (size_t k = 1; k < name.size(); ++k)
          all_known = all_known && app.get_option_no_throw(std::string("-") + name[k]);
        if (all_known) continue;
      }
      return "unknown option " + name +
             " before the command; a command's options go after it (`nightjar COMMAND --help` "
             "lists them, `nightjar --help` the commands and the global options)";
    }
    command = w;
    break;
  }
  if (!command.empty() && std::find(commands.begin(), commands.end(), command) == commands.end()) {
    const std::string hint = closest(command, commands);
    return "unknown command '" + command + "'" +
           (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
           "; `nightjar --help` lists the commands";
  }
  if (command.empty() || dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr) return std::nullopt;
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->get_name() == command) sub = s;
  if (!sub) return std::nullopt;
  std::vector<std::string> names = option_names(*sub);
  for (const std::string& n : option_names(app)) names.push_back(n);
  std::vector<std::string> unexpected;  // in the order given
  for (size_t k = at + 1; k < args.size(); ++k) {
    std::string w = args[k];
    if (w == "--") break;
    if (w.rfind("--", 0) == 0) {
      const std::string name = w.substr(0, w.find('='));
      if (sub->get_option_no_throw(name) || app.get_option_no_throw(name)) continue;
      const std::string hint = closest(name, names);
      return command + ": unknown option " + name +
             (hint.empty() ? "" : " (did you mean " + hint + "?)") + "; `nightjar " + command +
             " --help` lists its options";
    }
  }
  for (const std::string& w : sub->remaining()) unexpected.push_back(w);
  for (const std::string& w : app.remaining()) unexpected.push_back(w);
  if (unexpected.empty()) return std::nullopt;
  // CLI11 keeps them last first; put them back in the command line's order.
  std::stable_sort(
      unexpected.begin(), unexpected.end(), [&](const std::string& a, const std::string& b) {
        return std::find(args.begin(), args.end(), a) < std::find(args.begin(), args.end(), b);
      });
  std::string list;
  for (const std::string& w : unexpected) list += (list.empty() ? "" : " ") + w;
  return command + ": unexpected argument" + (unexpected.size() == 1 ? "" : "s") + ": " + list +
         "; `nightjar " + command + " --help` lists what it takes";
}

// A repeatable option takes one value per occurrence, so it never swallows the positional
// after it (`report --home H JOB`, `validate --allow-outputs DIR SPEC`): options may come
// before or after the positionals alike.
void one_value_per_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* opt : sub->get_options())
      if (!opt->get_positional() && opt->get_items_expected_max() > 1) opt->allow_extra_args(false);
  }
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
  one_value_per_option(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const bool help = e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success);
    const auto better = help ? std::nullopt : explain_parse_error(app, argc, argv, e);
    if (!better) {
      int rc = app.exit(e);  // prints help / version / the parse error
      if (rc == 0) return kExitOk;
    } else {
      std::fprintf(stderr, "nightjar: %s\n", better->c_str());
    }
    if (json) print_json({{"error", error_json(kExitUsage, better.value_or(e.what()))}});
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
