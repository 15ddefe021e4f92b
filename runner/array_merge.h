// `nightjar merge DIR`: the results of an array's tasks (DIR/results/task-I.jsonl, one
// result record per line, result_record.h) merged by custom_id against the manifest
// (array_manifest.h), so that every item of the job appears exactly once.
//
// Rules, per record:
//   - a line that is not a JSON object with a string custom_id and a known status: refused
//     (Corruption naming the file and line);
//   - a custom_id the job does not have, or one in another task's file than its shard's:
//     refused (FailedPrecondition naming the file and line: a results file of another array
//     or sharding);
//   - a custom_id seen before with the same answer (record_answer: everything but attempts,
//     timings and engine usage): a duplicate, kept once and noted;
//   - seen before with another answer: refused (FailedPrecondition naming both places).
// Items with no record, and records not 'done', make the merge incomplete; both are listed
// per task.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/util/status.h"
#include "runner/array_manifest.h"

namespace nj::runner {

// One task's results file as read.
struct TaskResults {
  int task = 0;
  std::string path;
  bool exists = false;
  std::vector<std::string> lines;  // non-empty lines, in file order; line numbers are 1-based
  std::vector<int> line_numbers;   // of each entry of `lines`
};

// Reads DIR/results/task-I.jsonl for every task of the manifest (absent files have
// exists = false). IOError naming a file that exists but cannot be read.
Result<std::vector<TaskResults>> read_task_results(const std::string& dir,
                                                   const ArrayManifest& manifest);

// What is missing from one task.
struct TaskGap {
  int task = 0;
  bool no_file = false;                  // the task has written no results yet
  std::vector<std::string> missing;      // items with no record (spec order)
  std::vector<nlohmann::json> not_done;  // records whose status is not 'done'
};

struct ArrayMerge {
  std::vector<nlohmann::json> records;  // one per item that has a record, in spec order
  std::vector<size_t> record_index;     // each record's place in the manifest's items
  std::vector<TaskGap> gaps;            // tasks with something missing or not done
  std::vector<std::string> duplicates;  // "task-1.jsonl:4 repeats task-1.jsonl:2 ('id')"
  size_t items = 0;                     // the job's items
  size_t done = 0;                      // of which done

  bool complete() const { return done == items; }
};

// Merges (rules above). The errors are the refusals above.
Result<ArrayMerge> merge_task_results(const ArrayManifest& manifest,
                                      const std::vector<TaskResults>& tasks);

// What is missing, per task, for people: one line per task with a gap, naming up to
// `max_ids` items per list.
std::string describe_gaps(const ArrayMerge& merge, size_t max_ids);

}  // namespace nj::runner
