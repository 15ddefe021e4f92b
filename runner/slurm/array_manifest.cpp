// The array directory's manifest (format in array_manifest.h).
#include "runner/slurm/array_manifest.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "jobs/inputs/shard.h"

namespace nj::runner {
namespace {

constexpr int kFormat = 1;

// The string at `key` of `j`, or Corruption naming the file and key.
Result<std::string> text_at(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto v = j.find(key);
  if (v == j.end() || !v->is_string())
    return corruption(where + ": '" + key + "' is missing or not a string");
  return v->get<std::string>();
}

}  // namespace

nlohmann::json ArrayManifest::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const ArrayItem& item : items)
    list.push_back({{"custom_id", item.custom_id}, {"task", item.task}});
  return {{"format", kFormat},      {"spec", spec},         {"name", name},   {"kind", kind},
          {"model_dir", model_dir}, {"settings", settings}, {"tasks", tasks}, {"items", list}};
}

std::string array_manifest_path(const std::string& dir) {
  return dir + "/array.json";
}
std::string array_home(const std::string& dir, int task) {
  return dir + "/homes/task-" + std::to_string(task);
}
std::string array_results_path(const std::string& dir, int task) {
  return dir + "/results/task-" + std::to_string(task) + ".jsonl";
}

Result<ArrayManifest> read_array_manifest(const std::string& dir) {
  const std::string path = array_manifest_path(dir);
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return not_found(path + ": no array manifest (was " + dir + " written by `nightjar slurm`?)");
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object()) return corruption(path + ": not a JSON object");
  if (!j.contains("format") || j["format"] != kFormat)
    return corruption(path + ": 'format' is not " + std::to_string(kFormat) +
                      " (written by another nightjar version?)");
  ArrayManifest m;
  NJ_ASSIGN_OR_RETURN(m.spec, text_at(j, "spec", path));
  NJ_ASSIGN_OR_RETURN(m.name, text_at(j, "name", path));
  NJ_ASSIGN_OR_RETURN(m.kind, text_at(j, "kind", path));
  NJ_ASSIGN_OR_RETURN(m.model_dir, text_at(j, "model_dir", path));
  m.settings = j.value("settings", nlohmann::json::object());
  if (!j.contains("tasks") || !j["tasks"].is_number_integer() || j["tasks"].get<int64_t>() < 1 ||
      j["tasks"].get<int64_t>() > jobs::kMaxShards)
    return corruption(path + ": 'tasks' is missing or not 1.." + std::to_string(jobs::kMaxShards));
  m.tasks = j["tasks"].get<int>();
  if (!j.contains("items") || !j["items"].is_array())
    return corruption(path + ": 'items' is missing or not an array");
  std::unordered_set<std::string> seen;
  for (size_t k = 0; k < j["items"].size(); ++k) {
    const nlohmann::json& e = j["items"][k];
    const std::string where = path + ": items[" + std::to_string(k) + "]";
    if (!e.is_object()) return corruption(where + " is not an object");
    ArrayItem item;
    NJ_ASSIGN_OR_RETURN(item.custom_id, text_at(e, "custom_id", where));
    if (!e.contains("task") || !e["task"].is_number_integer())
      return corruption(where + ": 'task' is missing or not an integer");
    item.task = e["task"].get<int>();
    if (item.task != jobs::shard_of(item.custom_id, m.tasks))
      return corruption(where + ": item '" + item.custom_id + "' is in task " +
                        std::to_string(item.task) + ", but its shard is " +
                        std::to_string(jobs::shard_of(item.custom_id, m.tasks)));
    if (!seen.insert(item.custom_id).second)
      return corruption(where + ": custom_id '" + item.custom_id + "' appears twice");
    m.items.push_back(std::move(item));
  }
  return m;
}

Status write_array_manifest(const std::string& dir, const ArrayManifest& manifest) {
  return write_file_durably(
      *Env::posix(), array_manifest_path(dir),
      manifest.to_json().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace nj::runner
