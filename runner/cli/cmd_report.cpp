// `nightjar report [JOB...] [--home DIR] [--out report.html] [--items N] [--review N]
// [--output json]`: the morning summary (runner/report/report.h) of the named jobs, or of every
// job in the store, as text (or one JSON object) on stdout; with --out also as a
// self-contained HTML page, written atomically. Over several
// homes (--home repeated, or a Slurm array's directory DIR among the arguments) each job
// name makes one report (report_combine.h).
#include <chrono>
#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/output.h"
#include "runner/report/report.h"
#include "runner/report/report_combine.h"
#include "runner/report/report_html.h"
#include "runner/store/home.h"

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
    std::vector<std::string> homes;
    std::string out;
    ReportOptions options;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "report", "The morning summary: items, tokens, wall time, s/token, disk wait (text, HTML)");
  sub->add_option("job", a->jobs,
                  "Job ids or names (default: every job), or a Slurm array's directory "
                  "(nightjar slurm --out): every task's home");
  sub->add_option("--home", a->homes,
                  "Home directory (default: $NIGHTJAR_HOME, else ~/.local/share/nightjar); "
                  "repeat it for one report over several homes")
      ->allow_extra_args(false);  // one value per --home: `report --home H JOB` names a job
  sub->add_option("--out", a->out,
                  "Also write a self-contained HTML page (summary, timeline, I/O share)");
  sub->add_option("--items", a->options.max_items,
                  "Items per job in the text and in the HTML page's table and timeline (0 = all; "
                  "failed items are always listed)")
      ->capture_default_str();
  sub->add_option("--review", a->options.review,
                  "Per classify job, list this many documents with the lowest margins, the least "
                  "certain answers (0 = none)")
      ->capture_default_str();
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a, sub]() -> int {
    // The JSON lists no item table (failed items and the review list are there whatever
    // --items says): without the HTML page --items would be silently ignored.
    if (a->output == "json" && a->out.empty() && sub->count("--items") > 0)
      return report_conflict("--items", "--output json",
                             "it sizes the text's and the HTML page's item tables; the JSON "
                             "lists every failed item and the review list");
    ReportSources sources;
    for (const std::string& arg : a->jobs)
      (is_array_dir(arg) ? sources.arrays : sources.jobs).push_back(arg);
    for (const std::string& flag :
         a->homes.empty() && sources.arrays.empty() ? std::vector<std::string>{""} : a->homes) {
      auto home = resolve_home(flag);
      if (!home.ok()) return report_usage_error("--home", home.status());
      sources.homes.push_back(home->dir);
    }
    std::vector<JobReport> reports;
    double now = 0;
    if (sources.homes.size() == 1 && sources.arrays.empty()) {
      auto store = open_home_store(Home{sources.homes.front()}, /*create=*/false);
      if (!store.ok()) return report_failure(store.status());
      auto jobs = select_jobs(**store, sources.jobs);
      if (!jobs.ok()) return report_failure(jobs.status());
      for (const JobRow& job : *jobs) {
        auto r = build_job_report(**store, job);
        if (!r.ok()) return report_failure(r.status());
        reports.push_back(std::move(*r));
      }
      now = (*store)->now();
    } else {
      auto all = reports_over_homes(sources);
      if (!all.ok()) return report_failure(all.status());
      reports = std::move(*all);
      now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
    }
    if (a->output == "json") {
      print_json(report_json(reports, now, a->options));
    } else {
      const std::string text = reports.empty() ? "no jobs\n" : report_text(reports, a->options);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    if (!a->out.empty()) {
      const std::string page = report_html(reports, now, a->options);
      if (Status s = write_file_durably(*Env::posix(), a->out, page); !s.ok())
        return report_failure(s);
      spdlog::info("wrote the report of {} job(s) to {}", reports.size(), a->out);
    }
    return kExitOk;
  });
}

}  // namespace nj::runner
