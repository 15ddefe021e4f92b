// `nightjar submit SPEC.yaml [--home DIR] [--output json]`: validate a job spec against its
// model and store the job and its items in one transaction (a rejected spec writes nothing).
#include <filesystem>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "jobs/spec_model.h"
#include "jobs/spec_parser.h"
#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/home.h"
#include "runner/output.h"

namespace nj::runner {
namespace {

NewJob to_new_job(const jobs::JobSpec& spec, const std::string& spec_path) {
  NewJob job;
  job.name = spec.name;
  job.kind = jobs::job_kind_name(spec.kind);
  job.model_dir = spec.model_dir;
  job.memory_bytes = spec.memory_bytes;
  job.max_attempts = spec.max_attempts;
  job.priority = spec.priority;
  job.spec_path = spec_path;
  job.settings_json = jobs::job_settings_to_json(spec).dump();
  for (const auto& item : spec.items) {
    job.items.push_back(NewItem{item.id, item.prompt_text ? item.prompt_text : item.document,
                                item.prompt_ids, jobs::item_params_to_json(spec, item).dump()});
  }
  return job;
}

}  // namespace

void add_submit_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string spec;
    std::string home;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("submit", "Validate a job spec and queue its items");
  sub->add_option("spec", a->spec, "Job spec (YAML)")->required();
  add_home_option(*sub, a->home);
  sub->add_option("--output", a->output, "text (the job id) or json")
      ->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto home = resolve_home(a->home);
    if (!home.ok()) return report_usage_error("--home", home.status());
    auto spec = jobs::load_job_spec(a->spec);
    if (!spec.ok()) return report_failure(spec.status());
    if (Status s = jobs::bind_spec_to_model(*spec); !s.ok()) return report_failure(s);
    std::error_code ec;
    const std::string spec_path =
        std::filesystem::absolute(a->spec, ec).lexically_normal().string();
    auto store = open_home_store(*home, /*create=*/true);
    if (!store.ok()) return report_failure(store.status());
    auto id = (*store)->submit(to_new_job(*spec, spec_path.empty() ? a->spec : spec_path));
    if (!id.ok()) return report_failure(id.status().with_context(a->spec));
    if (a->output == "json") {
      print_json({{"job_id", *id},
                  {"name", spec->name},
                  {"kind", jobs::job_kind_name(spec->kind)},
                  {"items", spec->items.size()},
                  {"home", home->dir}});
    } else {
      std::printf("%lld\n", static_cast<long long>(*id));
      std::fflush(stdout);
      spdlog::info("queued job {} '{}': {} items (home {})", *id, spec->name, spec->items.size(),
                   home->dir);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
