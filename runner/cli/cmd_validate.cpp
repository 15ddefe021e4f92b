// `nightjar validate SPEC.yaml [--output json]`: every check `submit` makes (the spec's
// syntax and keys, then its model: the directory, the tokenizer, prompt tokenization and
// the vocabulary) without opening or creating any job store. `nightjar validate
// --openai-batch FILE.jsonl --model DIR` does the same for an OpenAI Batch API file.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "jobs/openai/openai_batch.h"
#include "jobs/spec/output_paths.h"
#include "jobs/spec/spec_model.h"
#include "jobs/spec/spec_parser.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/store/home.h"

namespace nj::runner {
namespace {

// The spec as `submit` would queue it (into the default home, or the one --home names),
// or the first stage's errors.
Result<jobs::JobSpec> check_spec(const std::string& path,
                                 const std::vector<std::string>& allow_outputs,
                                 const std::string& home_flag) {
  NJ_ASSIGN_OR_RETURN(jobs::JobSpec spec, jobs::load_job_spec(path));
  NJ_RETURN_IF_ERROR(jobs::bind_spec_to_model(spec));
  std::vector<std::string> homes;
  if (auto home = resolve_home(home_flag); home.ok()) homes.push_back(home->dir);
  NJ_RETURN_IF_ERROR(jobs::check_declared_outputs(spec, allow_outputs, homes, Home::kStoreFile));
  return spec;
}

// The lines of a multi-line error message.
nlohmann::json error_lines(const std::string& message) {
  nlohmann::json lines = nlohmann::json::array();
  size_t start = 0;
  while (start <= message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    if (end > start) lines.push_back(message.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

}  // namespace

void add_validate_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string spec;
    std::string openai_batch;
    std::string model;
    std::vector<std::string> allow_outputs;
    std::string home;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "validate", "Check a job spec as submit does (syntax, keys, model, prompts); store nothing");
  sub->add_option("spec", a->spec, "Job spec (YAML)");
  sub->add_option("--openai-batch", a->openai_batch,
                  "Instead of a spec: an OpenAI Batch API input file (as submit --openai-batch)");
  sub->add_option("--model", a->model, "With --openai-batch: the model directory");
  sub->add_option("--allow-outputs", a->allow_outputs,
                  "As submit: a directory outside the spec's own where outputs may go");
  sub->add_option("--home", a->home,
                  "The home submit would use, which outputs must stay out of (default: "
                  "$NIGHTJAR_HOME, else ~/.local/share/nightjar); never opened");
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    if (a->spec.empty() == a->openai_batch.empty())
      return report_usage_error("SPEC", invalid_argument("give a job spec or --openai-batch FILE"));
    if (a->openai_batch.empty() != a->model.empty())
      return report_usage_error(
          a->model.empty() ? "--openai-batch" : "--model",
          invalid_argument(a->model.empty() ? "needs --model DIR" : "goes with --openai-batch"));
    // A batch file declares no outputs: the flags that check a spec's would be ignored.
    if (!a->openai_batch.empty() && !a->allow_outputs.empty())
      return report_conflict("--allow-outputs", "--openai-batch",
                             "it checks where a spec's outputs go; a batch file declares none");
    if (!a->openai_batch.empty() && !a->home.empty())
      return report_conflict("--home", "--openai-batch",
                             "outputs must stay out of the home; a batch file declares none");
    const std::string& source = a->spec.empty() ? a->openai_batch : a->spec;
    auto spec = a->spec.empty() ? jobs::load_openai_batch({a->openai_batch, a->model, "", {}})
                                : check_spec(a->spec, a->allow_outputs, a->home);
    if (!spec.ok()) {
      if (a->output == "json")
        print_json({{"ok", false},
                    {"spec", source},
                    {"errors", error_lines(spec.status().message())},
                    {"error", error_json(exit_code_for(spec.status()), spec.status().message())}});
      return report_failure(spec.status());
    }
    if (a->output == "json") {
      print_json({{"ok", true},
                  {"spec", source},
                  {"name", spec->name},
                  {"kind", jobs::job_kind_name(spec->kind)},
                  {"model", spec->model_dir},
                  {"items", spec->items.size()}});
    } else {
      std::printf("OK %s: job '%s' (%s), %zu items\n", source.c_str(), spec->name.c_str(),
                  jobs::job_kind_name(spec->kind), spec->items.size());
      std::fflush(stdout);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
