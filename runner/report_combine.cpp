// Reports over several homes (report_combine.h).
#include "runner/report_combine.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "runner/array_manifest.h"
#include "runner/home.h"

namespace nj::runner {

bool is_array_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(array_manifest_path(path), ec);
}

JobReport combine_job_reports(std::vector<JobReport> parts, const std::vector<std::string>& order) {
  JobReport r;
  r.job = parts.front().job;
  r.homes = static_cast<int>(parts.size());
  std::unordered_map<std::string, ItemReport> by_id;
  std::vector<ItemReport> items;
  for (JobReport& p : parts) {
    r.done += p.done;
    r.failed += p.failed;
    r.cancelled += p.cancelled;
    r.queued += p.queued;
    r.running += p.running;
    r.tokens += p.tokens;
    r.engine_s += p.engine_s;
    r.usage += p.usage;
    if (p.first_start)
      r.first_start = std::min(r.first_start.value_or(*p.first_start), *p.first_start);
    if (p.last_finish)
      r.last_finish = std::max(r.last_finish.value_or(*p.last_finish), *p.last_finish);
    for (ItemReport& i : p.items) {
      if (order.empty())
        items.push_back(std::move(i));
      else
        by_id.emplace(i.custom_id, std::move(i));
    }
  }
  if (order.empty()) {
    r.items = std::move(items);
    return r;
  }
  for (const std::string& id : order) {
    auto it = by_id.find(id);
    if (it != by_id.end()) {
      r.items.push_back(std::move(it->second));
      by_id.erase(it);
      continue;
    }
    ItemReport waiting;  // in no home yet
    waiting.custom_id = id;
    r.items.push_back(std::move(waiting));
    ++r.queued;
  }
  for (auto& [id, i] : by_id) r.items.push_back(std::move(i));  // not in the manifest
  return r;
}

namespace {

struct Part {
  std::vector<JobReport> reports;
  const ArrayManifest* array = nullptr;
};

// Adds the reports of `names` (every job when empty) in `home` to `parts`. A missing store or
// a job name the home lacks is skipped when `optional`.
Status add_home(const std::string& dir, const std::vector<std::string>& names, bool optional,
                const ArrayManifest* array, std::vector<std::string>& order,
                std::map<std::string, Part>& parts, std::vector<std::string>& found) {
  auto home = resolve_home(dir);
  if (!home.ok()) return home.status();
  auto store = open_home_store(*home, /*create=*/false);
  if (!store.ok()) {
    if (optional && store.status().code() == StatusCode::kNotFound) return Status();
    return store.status();
  }
  std::vector<JobRow> jobs;
  if (names.empty()) {
    NJ_ASSIGN_OR_RETURN(std::vector<JobSummary> all, (*store)->list_jobs());
    for (auto& j : all) jobs.push_back(std::move(j.job));
  }
  for (const std::string& name : names) {
    auto job = (*store)->find_job(name);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kNotFound) continue;
      return job.status();
    }
    found.push_back(name);
    jobs.push_back(std::move(*job));
  }
  for (const JobRow& job : jobs) {
    NJ_ASSIGN_OR_RETURN(JobReport r, build_job_report(**store, job));
    if (!parts.count(job.name)) order.push_back(job.name);
    Part& part = parts[job.name];
    if (array && array->name == job.name) part.array = array;
    part.reports.push_back(std::move(r));
  }
  return Status();
}

}  // namespace

Result<std::vector<JobReport>> reports_over_homes(const ReportSources& sources) {
  std::vector<ArrayManifest> arrays;
  for (const std::string& dir : sources.arrays) {
    NJ_ASSIGN_OR_RETURN(ArrayManifest m, read_array_manifest(dir));
    arrays.push_back(std::move(m));
  }
  std::vector<std::string> order, found;
  std::map<std::string, Part> parts;
  for (const std::string& home : sources.homes)
    NJ_RETURN_IF_ERROR(add_home(home, sources.jobs, false, nullptr, order, parts, found));
  for (size_t a = 0; a < arrays.size(); ++a) {
    // An array's tasks hold its job only; a task not started yet has no home.
    const std::vector<std::string> names =
        sources.jobs.empty() ? std::vector<std::string>{arrays[a].name} : sources.jobs;
    for (int t = 0; t < arrays[a].tasks; ++t)
      NJ_RETURN_IF_ERROR(
          add_home(array_home(sources.arrays[a], t), names, true, &arrays[a], order, parts, found));
    if (!parts.count(arrays[a].name) && sources.jobs.empty()) {
      order.push_back(arrays[a].name);  // no task has started: every item is waiting
      parts[arrays[a].name].array = &arrays[a];
    }
  }
  for (const std::string& name : sources.jobs)
    if (std::find(found.begin(), found.end(), name) == found.end())
      return not_found("no job '" + name + "' in any of the homes");
  std::vector<JobReport> out;
  for (const std::string& name : order) {
    Part& part = parts[name];
    std::vector<std::string> ids;
    if (part.array)
      for (const ArrayItem& item : part.array->items) ids.push_back(item.custom_id);
    if (part.reports.empty()) {  // an array none of whose tasks has started
      JobReport empty;
      empty.job.name = part.array->name;
      empty.job.kind = part.array->kind;
      empty.job.model_dir = part.array->model_dir;
      part.reports.push_back(std::move(empty));
    }
    if (part.reports.size() == 1 && !part.array)
      out.push_back(std::move(part.reports.front()));
    else
      out.push_back(combine_job_reports(std::move(part.reports), ids));
  }
  return out;
}

}  // namespace nj::runner
