// Reading a YAML mapping key by key with positioned errors: the building block of every
// job-kind parser. Collects all errors of a spec (not just the first), each as
// "<file>:<line>:<col>: <key path>: <what>", and reports keys nobody asked for as unknown.
// Private to nightjar_jobs (includes yaml-cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "engine/util/status.h"

namespace nj::jobs {

// The errors found in one spec file.
class SpecErrors {
 public:
  explicit SpecErrors(std::string file) : file_(std::move(file)) {}

  // Adds "<file>:<line>:<col>: <path>: <message>" at `at` (the file alone when the node
  // has no position); `path` may be empty.
  void add(const YAML::Node& at, const std::string& path, const std::string& message);
  bool empty() const { return lines_.empty(); }
  size_t count() const { return lines_.size(); }
  // OK when empty; otherwise InvalidArgument with one error per line (at most 20 listed).
  Status status() const;
  const std::string& file() const { return file_; }
  // "<file>:<line>:<col>" of a node.
  std::string where(const YAML::Node& node) const;

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

enum class Need { kOptional, kRequired };

// One mapping of the spec. Not copyable; lives while its keys are read.
class MapReader {
 public:
  // `path` names the mapping in messages: "" at the top, "defaults", "items[2]".
  // A node that is not a mapping, and duplicate keys, are reported here.
  MapReader(SpecErrors& errors, const YAML::Node& node, std::string path);
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  bool is_map() const { return is_map_; }
  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  // "items[2].prompt_ids" for key "prompt_ids".
  std::string key_path(const std::string& key) const;

  // Marks `key` as known and returns its value if present (first occurrence).
  std::optional<YAML::Node> find(const std::string& key);
  // Marks `key` as known; true when present.
  bool has(const std::string& key) { return find(key).has_value(); }

  // Typed reads: each marks the key known, reports a missing required key at the mapping
  // and a mistyped or out-of-range value at the value, and returns nullopt on any error.
  std::optional<std::string> string(const std::string& key, Need need);
  std::optional<int64_t> integer(const std::string& key, int64_t min, int64_t max, Need need);
  std::optional<uint64_t> unsigned_integer(const std::string& key, Need need);
  std::optional<bool> boolean(const std::string& key, Need need);
  std::optional<double> number(const std::string& key, double min, double max, Need need);

  // Reports every key no read asked for ("unknown key 'x' (known: a, b, c)").
  // Call once, after all reads.
  void report_unknown_keys();

  SpecErrors& errors() { return errors_; }

 private:
  std::optional<YAML::Node> get(const std::string& key, Need need);

  SpecErrors& errors_;
  YAML::Node node_;
  std::string path_;
  bool is_map_ = false;
  std::set<std::string> known_;
};

// Typed scalar conversions for values outside a MapReader (sequence elements). They report
// through `errors` at the node, under `path`, and return nullopt on error.
std::optional<int64_t> read_integer(SpecErrors& errors, const YAML::Node& node,
                                    const std::string& path, int64_t min, int64_t max);

}  // namespace nj::jobs
