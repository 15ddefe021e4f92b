// Merging an array's task results (rules in array_merge.h).
#include "runner/slurm/array_merge.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "runner/results/result_record.h"
#include "runner/store/job_store.h"

namespace nj::runner {
namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A record of a line, or Corruption naming the place.
Result<nlohmann::json> parse_record(const std::string& line, const std::string& where) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return corruption(where + ": not a JSON object (a result record)");
  if (!j.contains("custom_id") || !j["custom_id"].is_string())
    return corruption(where + ": 'custom_id' is missing or not a string");
  if (!j.contains("status") || !j["status"].is_string() ||
      !parse_item_state(j["status"].get<std::string>()).ok())
    return corruption(where + ": 'status' is missing or not an item state");
  return j;
}

}  // namespace

Result<std::vector<TaskResults>> read_task_results(const std::string& dir,
                                                   const ArrayManifest& manifest) {
  std::vector<TaskResults> out;
  for (int t = 0; t < manifest.tasks; ++t) {
    TaskResults r;
    r.task = t;
    r.path = array_results_path(dir, t);
    std::ifstream f(r.path, std::ios::binary);
    r.exists = static_cast<bool>(f);
    std::string line;
    for (int n = 1; r.exists && std::getline(f, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      r.lines.push_back(line);
      r.line_numbers.push_back(n);
    }
    if (r.exists && f.bad()) return io_error(r.path + ": cannot read");
    out.push_back(std::move(r));
  }
  return out;
}

Result<ArrayMerge> merge_task_results(const ArrayManifest& manifest,
                                      const std::vector<TaskResults>& tasks) {
  std::unordered_map<std::string, size_t> index;  // custom_id -> place in the manifest
  for (size_t k = 0; k < manifest.items.size(); ++k) index[manifest.items[k].custom_id] = k;
  std::vector<std::optional<nlohmann::json>> found(manifest.items.size());
  std::vector<std::string> found_where(manifest.items.size());
  ArrayMerge m;
  m.items = manifest.items.size();
  for (const TaskResults& t : tasks) {
    for (size_t n = 0; n < t.lines.size(); ++n) {
      const std::string line = ":" + std::to_string(t.line_numbers[n]);
      const std::string place = t.path + line;             // for errors
      const std::string where = base_name(t.path) + line;  // for notes
      NJ_ASSIGN_OR_RETURN(nlohmann::json record, parse_record(t.lines[n], place));
      const std::string id = record["custom_id"].get<std::string>();
      const auto k = index.find(id);
      if (k == index.end())
        return failed_precondition(place + ": item '" + id + "' is not an item of job '" +
                                   manifest.name + "' (a results file of another array?)");
      const int owner = manifest.items[k->second].task;
      if (owner != t.task)
        return failed_precondition(place + ": item '" + id + "' belongs to task " +
                                   std::to_string(owner) + " of " + std::to_string(manifest.tasks) +
                                   ", not task " + std::to_string(t.task) +
                                   " (a results file of another sharding?)");
      if (found[k->second]) {
        if (record_answer(*found[k->second]) != record_answer(record))
          return failed_precondition("conflicting results for item '" + id +
                                     "': " + found_where[k->second] + " and " + where +
                                     " differ (status, output or details)");
        m.duplicates.push_back(where + " repeats " + found_where[k->second] + " ('" + id + "')");
        continue;
      }
      found[k->second] = std::move(record);
      found_where[k->second] = where;
    }
  }
  std::vector<TaskGap> gaps(manifest.tasks);
  for (int t = 0; t < manifest.tasks; ++t) gaps[t].task = t;
  for (const TaskResults& t : tasks)
    if (t.task >= 0 && t.task < manifest.tasks) gaps[t.task].no_file = !t.exists;
  for (size_t k = 0; k < manifest.items.size(); ++k) {
    TaskGap& gap = gaps[manifest.items[k].task];
    if (!found[k]) {
      gap.missing.push_back(manifest.items[k].custom_id);
      continue;
    }
    if ((*found[k])["status"] == "done")
      ++m.done;
    else
      gap.not_done.push_back(*found[k]);
    m.records.push_back(std::move(*found[k]));
    m.record_index.push_back(k);
  }
  for (TaskGap& gap : gaps)
    if (!gap.missing.empty() || !gap.not_done.empty()) m.gaps.push_back(std::move(gap));
  return m;
}

std::string describe_gaps(const ArrayMerge& merge, size_t max_ids) {
  std::string out;
  const auto list = [max_ids](const std::vector<std::string>& ids) {
    std::string s;
    for (size_t k = 0; k < ids.size() && k < max_ids; ++k) s += (k ? ", " : "") + ids[k];
    if (ids.size() > max_ids) s += ", ... (" + std::to_string(ids.size() - max_ids) + " more)";
    return s;
  };
  for (const TaskGap& gap : merge.gaps) {
    out += "task " + std::to_string(gap.task) + ":";
    if (!gap.missing.empty())
      out += " " + std::to_string(gap.missing.size()) + " missing" +
             (gap.no_file ? " (no results file yet)" : "") + ": " + list(gap.missing) + ";";
    if (!gap.not_done.empty()) {
      std::vector<std::string> ids;
      for (const nlohmann::json& r : gap.not_done) {
        std::string e = r["custom_id"].get<std::string>() + " " + r["status"].get<std::string>();
        if (const std::string error = record_error(r); !error.empty()) e += " (" + error + ")";
        ids.push_back(e);
      }
      out += " " + std::to_string(gap.not_done.size()) + " not done: " + list(ids) + ";";
    }
    out.back() = '\n';
  }
  return out;
}

}  // namespace nj::runner
