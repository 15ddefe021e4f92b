// `nightjar doctor [--dir DIR] [--output json]`.
#include <memory>

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
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "doctor", "Report SIMD level, memory, free disk, O_DIRECT support and measured read bandwidth");
  sub->add_option("--dir", args->dir, "Directory whose filesystem to measure (default: .)");
  sub->add_option("--output", args->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--probe-size", args->probe_size, "Size of the temporary probe file (default 512MiB)");
  sub->add_flag("--no-memory-probe", args->no_memory, "Skip the memory-bandwidth measurement");
  table.emplace_back(sub, [args]() -> int {
    auto probe = parse_size_flag(args->probe_size);
    if (!probe.ok()) return report_usage_error("--probe-size", probe.status());
    DoctorOptions options;
    options.dir = args->dir;
    options.probe_bytes = *probe;
    options.measure_memory = !args->no_memory;
    auto report = run_doctor(options, NIGHTJAR_VERSION);
    if (!report.ok()) return report_failure(report.status());
    if (args->output == "json")
      print_json(doctor_json(*report));
    else
      std::fputs(doctor_text(*report).c_str(), stdout);
    return 0;
  });
}

}  // namespace nj::runner
