// `nightjar doctor [--dir DIR] [--model DIR] [--output json]`.
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "engine/util/units.h"
#include "runner/cli/commands.h"
#include "runner/cli/output.h"
#include "runner/forecast/doctor.h"
#include "runner/run/model_args.h"

namespace nj::runner {

void add_doctor_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string dir = ".";
    std::string output = "text";
    std::string probe_size = "512MiB";
    bool no_memory = false;
    std::string model;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Report SIMD level, memory, free disk, O_DIRECT support and measured read bandwidth");
  sub->add_option("--dir", args->dir, "Directory whose filesystem to measure (default: .)");
  sub->add_option("--output", args->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--probe-size", args->probe_size, "Size of the temporary probe file (default 512MiB)");
  sub->add_flag("--no-memory-probe", args->no_memory, "Skip the memory-bandwidth measurement");
  sub->add_option("--model", args->model,
                  "Also check a model directory: config, every shard's header and extents, the "
                  "tokenizer and chat tokens, the smallest budget (headers only; exit 3 and the "
                  "file and offset when something is missing or damaged)");
  table.emplace_back(sub, [args]() -> int {
    auto probe = parse_size_flag(args->probe_size);
    if (!probe.ok()) return report_usage_error("--probe-size", probe.status());
    DoctorOptions options;
    options.dir = args->dir;
    options.probe_bytes = *probe;
    options.measure_memory = !args->no_memory;
    std::optional<ModelCheck> model;
    if (!args->model.empty()) {
      auto checked = check_model(args->model);
      if (!checked.ok()) return report_failure(checked.status().with_context("--model"));
      model = std::move(*checked);
    }
    auto report = run_doctor(options, NIGHTJAR_VERSION);
    if (!report.ok()) return report_failure(report.status());
    if (args->output == "json") {
      nlohmann::json j = doctor_json(*report);
      if (model) j["model"] = model_check_json(*model);
      print_json(j);
    } else {
      std::fputs(doctor_text(*report).c_str(), stdout);
      if (model) std::fputs(model_check_text(*model).c_str(), stdout);
    }
    return 0;
  });
}

}  // namespace nj::runner
