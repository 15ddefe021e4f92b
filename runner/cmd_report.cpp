// `nightjar report [JOB...] [--home DIR] [--out report.html] [--items N]`: the morning
// summary (runner/report.h) of the named jobs, or of every job in the store, as text on
// stdout; with --out also as a self-contained HTML page, written atomically.
#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/home.h"
#include "runner/output.h"
#include "runner/report.h"
#include "runner/report_html.h"

namespace nj::runner {
namespace {

// The jobs named (ids or names), or every job in the store when none is.
Result<std::vector<JobRow>> select_jobs(JobStore& store, const std::vector<std::string>& names) {
  std::vector<JobRow> jobs;
  if (names.empty()) {
    NJ_ASSIGN_OR_RETURN(std::vector<JobSummary> all, store.list_jobs());
    for (auto& j : all) jobs.push_back(std::move(j.job));
    return jobs;
  }
  for (const std::string& name : names) {
    NJ_ASSIGN_OR_RETURN(JobRow job, store.find_job(name));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace

void add_report_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::vector<std::string> jobs;
    std::string home;
    std::string out;
    size_t items = 20;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "report", "The morning summary: items, tokens, wall time, s/token, disk wait (text, HTML)");
  sub->add_option("job", a->jobs, "Job ids or names (default: every job)");
  add_home_option(*sub, a->home);
  sub->add_option("--out", a->out,
                  "Also write a self-contained HTML page (summary, timeline, I/O share)");
  sub->add_option("--items", a->items,
                  "Items per job in the text and in the HTML page's table and timeline (0 = all)")
      ->capture_default_str();
  table.emplace_back(sub, [a]() -> int {
    auto home = resolve_home(a->home);
    if (!home.ok()) return report_usage_error("--home", home.status());
    auto store = open_home_store(*home, /*create=*/false);
    if (!store.ok()) return report_failure(store.status());
    auto jobs = select_jobs(**store, a->jobs);
    if (!jobs.ok()) return report_failure(jobs.status());
    std::vector<JobReport> reports;
    for (const JobRow& job : *jobs) {
      auto r = build_job_report(**store, job);
      if (!r.ok()) return report_failure(r.status());
      reports.push_back(std::move(*r));
    }
    const std::string text = reports.empty() ? "no jobs\n" : report_text(reports, a->items);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!a->out.empty()) {
      const std::string page = report_html(reports, (*store)->now(), a->items);
      if (Status s = write_file_durably(*Env::posix(), a->out, page); !s.ok())
        return report_failure(s);
      spdlog::info("wrote the report of {} job(s) to {}", reports.size(), a->out);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
