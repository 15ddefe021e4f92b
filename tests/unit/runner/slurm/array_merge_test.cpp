// `nightjar merge` (runner/slurm/array_merge.h): every item exactly once; duplicates kept once;
// missing and unfinished items named per task; conflicting or foreign results refused.
#include "runner/slurm/array_merge.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "jobs/inputs/shard.h"
#include "tests/unit/runner/store/store_test_util.h"

namespace nj::runner {
namespace {

constexpr int kTasks = 3;

// A job of `n` items doc-0.. sharded into three tasks.
ArrayManifest manifest(int n) {
  ArrayManifest m;
  m.spec = "/specs/night.yaml";
  m.name = "night";
  m.kind = "generate";
  m.model_dir = "/models/m";
  m.tasks = kTasks;
  for (int i = 0; i < n; ++i) {
    const std::string id = "doc-" + std::to_string(i);
    m.items.push_back({id, jobs::shard_of(id, kTasks)});
  }
  return m;
}

// The record of a finished item; `attempts` and timings vary between runs of one answer.
std::string done_line(const std::string& id, std::vector<int> out, int attempts = 0,
                      double wall = 1.0) {
  nlohmann::json r = {{"custom_id", id},
                      {"status", "done"},
                      {"error", nullptr},
                      {"prompt_tokens", 2},
                      {"attempts", attempts},
                      {"output_ids", out},
                      {"output_tokens", out.size()},
                      {"finish_reason", "length"},
                      {"timings", {{"wall_s", wall}}},
                      {"engine", {{"bytes_read", 7}}}};
  return r.dump();
}

std::string state_line(const std::string& id, const std::string& status, const char* error) {
  nlohmann::json r = {{"custom_id", id},
                      {"status", status},
                      {"output_ids", nullptr},
                      {"output_tokens", 0},
                      {"finish_reason", nullptr}};
  r["error"] = error ? nlohmann::json(error) : nlohmann::json(nullptr);
  return r.dump();
}

// Every task's file holding a done record for each of its items.
std::vector<TaskResults> complete_results(const ArrayManifest& m) {
  std::vector<TaskResults> tasks(kTasks);
  for (int t = 0; t < kTasks; ++t) {
    tasks[t].task = t;
    tasks[t].path = "/array/results/task-" + std::to_string(t) + ".jsonl";
    tasks[t].exists = true;
  }
  for (size_t k = 0; k < m.items.size(); ++k) {
    TaskResults& t = tasks[m.items[k].task];
    t.lines.push_back(done_line(m.items[k].custom_id, {static_cast<int>(k), 1}));
    t.line_numbers.push_back(static_cast<int>(t.lines.size()));
  }
  return tasks;
}

void append(TaskResults& t, const std::string& line) {
  t.lines.push_back(line);
  t.line_numbers.push_back(static_cast<int>(t.lines.size()));
}

TEST_CASE("merge takes every item exactly once, in spec order", "[runner][merge]") {
  const ArrayManifest m = manifest(12);
  auto merged = merge_task_results(m, complete_results(m));
  REQUIRE(merged.ok());
  CHECK(merged->complete());
  CHECK(merged->done == 12);
  REQUIRE(merged->records.size() == 12);
  for (size_t k = 0; k < 12; ++k) {
    CHECK(merged->records[k]["custom_id"] == m.items[k].custom_id);
    CHECK(merged->records[k]["output_ids"][0] == static_cast<int>(k));
    CHECK(merged->record_index[k] == k);
  }
  CHECK(merged->gaps.empty());
  CHECK(merged->duplicates.empty());
}

TEST_CASE("merge keeps a duplicate with the same answer once and notes it", "[runner][merge]") {
  const ArrayManifest m = manifest(12);
  auto tasks = complete_results(m);
  const ArrayItem& item = m.items[4];
  // The same answer after a requeue: other attempts and timings.
  append(tasks[item.task], done_line(item.custom_id, {4, 1}, 2, 9.5));
  auto merged = merge_task_results(m, tasks);
  REQUIRE(merged.ok());
  CHECK(merged->complete());
  CHECK(merged->records.size() == 12);
  REQUIRE(merged->duplicates.size() == 1);
  CHECK(merged->duplicates[0].find("'doc-4'") != std::string::npos);
  CHECK(merged->records[4]["attempts"] == 0);  // the first one is kept
}

TEST_CASE("merge refuses conflicting results for one item, naming both places", "[runner][merge]") {
  const ArrayManifest m = manifest(12);
  auto tasks = complete_results(m);
  const ArrayItem& item = m.items[7];
  append(tasks[item.task], done_line(item.custom_id, {7, 2}));
  auto merged = merge_task_results(m, tasks);
  REQUIRE_FALSE(merged.ok());
  CHECK(merged.status().code() == StatusCode::kFailedPrecondition);
  const std::string& msg = merged.status().message();
  CHECK(msg.find("conflicting results for item 'doc-7'") != std::string::npos);
  CHECK(msg.find("task-" + std::to_string(item.task) + ".jsonl:") != std::string::npos);

  // A failed record against a done one conflicts too.
  tasks = complete_results(m);
  append(tasks[item.task], state_line(item.custom_id, "failed", "boom"));
  CHECK_FALSE(merge_task_results(m, tasks).ok());
}

TEST_CASE("merge names missing and unfinished items per task and is incomplete",
          "[runner][merge]") {
  const ArrayManifest m = manifest(12);
  auto tasks = complete_results(m);
  // Task 0 wrote nothing; one item of task 1 failed; task 2 lost one line.
  const std::vector<std::string> lost0 = [&] {
    std::vector<std::string> ids;
    for (const auto& i : m.items)
      if (i.task == 0) ids.push_back(i.custom_id);
    return ids;
  }();
  REQUIRE(!lost0.empty());
  tasks[0].exists = false;
  tasks[0].lines.clear();
  tasks[0].line_numbers.clear();
  std::string failed_id, missing_id;
  for (const auto& i : m.items) {
    if (i.task == 1 && failed_id.empty()) failed_id = i.custom_id;
    if (i.task == 2 && missing_id.empty()) missing_id = i.custom_id;
  }
  for (size_t n = 0; n < tasks[1].lines.size(); ++n)
    if (nlohmann::json::parse(tasks[1].lines[n])["custom_id"] == failed_id)
      tasks[1].lines[n] = state_line(failed_id, "failed", "engine: boom");
  for (size_t n = 0; n < tasks[2].lines.size(); ++n)
    if (nlohmann::json::parse(tasks[2].lines[n])["custom_id"] == missing_id) {
      tasks[2].lines.erase(tasks[2].lines.begin() + n);
      tasks[2].line_numbers.erase(tasks[2].line_numbers.begin() + n);
      break;
    }
  auto merged = merge_task_results(m, tasks);
  REQUIRE(merged.ok());
  CHECK_FALSE(merged->complete());
  CHECK(merged->done == 12 - lost0.size() - 2);
  REQUIRE(merged->gaps.size() == 3);
  CHECK(merged->gaps[0].no_file);
  CHECK(merged->gaps[0].missing == lost0);
  REQUIRE(merged->gaps[1].not_done.size() == 1);
  CHECK(merged->gaps[1].not_done[0]["custom_id"] == failed_id);
  CHECK(merged->gaps[2].missing == std::vector<std::string>{missing_id});
  const std::string text = describe_gaps(*merged, 100);
  CHECK(text.find("task 0: " + std::to_string(lost0.size()) +
                  " missing (no results file yet): " + lost0[0]) != std::string::npos);
  CHECK(text.find(failed_id + " failed (engine: boom)") != std::string::npos);
  CHECK(text.find("task 2: 1 missing: " + missing_id) != std::string::npos);
}

TEST_CASE("merge refuses records of other jobs, other shardings and malformed lines",
          "[runner][merge]") {
  const ArrayManifest m = manifest(12);
  {
    auto tasks = complete_results(m);
    append(tasks[1], done_line("stranger", {1}));
    auto r = merge_task_results(m, tasks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("task-1.jsonl:") != std::string::npos);
    CHECK(r.status().message().find("'stranger' is not an item of job 'night'") !=
          std::string::npos);
  }
  {
    auto tasks = complete_results(m);
    const ArrayItem& item = m.items[0];
    const int wrong = (item.task + 1) % kTasks;
    append(tasks[wrong], done_line(item.custom_id, {0, 1}));
    auto r = merge_task_results(m, tasks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("belongs to task " + std::to_string(item.task)) !=
          std::string::npos);
  }
  for (const std::string bad : {"{not json", "[1,2]", R"({"status":"done"})",
                                R"({"custom_id":"doc-0","status":"finished"})"}) {
    auto tasks = complete_results(m);
    append(tasks[2], bad);
    auto r = merge_task_results(m, tasks);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kCorruption);
    CHECK(r.status().message().find("/array/results/task-2.jsonl:" +
                                    std::to_string(tasks[2].lines.size())) != std::string::npos);
  }
}

TEST_CASE("merge reads task files from the array directory, the manifest is checked",
          "[runner][merge]") {
  TempDir dir;
  const std::string d = dir.file("array");
  std::filesystem::create_directories(d + "/results");
  const ArrayManifest m = manifest(6);
  REQUIRE(write_array_manifest(d, m).ok());
  auto back = read_array_manifest(d);
  REQUIRE(back.ok());
  CHECK(back->items.size() == 6);
  CHECK(back->tasks == kTasks);
  write_bytes(array_results_path(d, 1), "\n" + done_line("x", {1}) + "\n\n");
  auto tasks = read_task_results(d, *back);
  REQUIRE(tasks.ok());
  REQUIRE(tasks->size() == kTasks);
  CHECK_FALSE((*tasks)[0].exists);
  REQUIRE((*tasks)[1].lines.size() == 1);
  CHECK((*tasks)[1].line_numbers[0] == 2);  // line numbers count the blank lines

  // A manifest whose item sits in the wrong task is refused, naming the item.
  nlohmann::json j = m.to_json();
  j["items"][0]["task"] = (m.items[0].task + 1) % kTasks;
  write_bytes(array_manifest_path(d), j.dump());
  auto bad = read_array_manifest(d);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("items[0]") != std::string::npos);
  auto none = read_array_manifest(dir.file("nothing"));
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == StatusCode::kNotFound);
}

}  // namespace
}  // namespace nj::runner
