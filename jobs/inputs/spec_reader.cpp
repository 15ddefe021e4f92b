// MapReader and SpecErrors: positioned, collected errors while reading YAML mappings.
#include "jobs/inputs/spec_reader.h"

#include <cmath>
#include <cstdio>

namespace nj::jobs {
namespace {

constexpr size_t kMaxListedErrors = 20;

const char* type_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "an undefined value";
  }
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string quoted_scalar(const YAML::Node& n) {
  return n.IsScalar() ? "'" + n.Scalar() + "'" : std::string(type_name(n));
}

}  // namespace

std::string SpecErrors::where(const YAML::Node& node) const {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file_;
  // yaml-cpp marks are 0-based; editors count from 1.
  return file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

void SpecErrors::add(const YAML::Node& at, const std::string& path, const std::string& message) {
  lines_.push_back(where(at) + ": " + (path.empty() ? "" : path + ": ") + message);
}

Status SpecErrors::status() const {
  if (lines_.empty()) return Status();
  std::string text;
  for (size_t i = 0; i < lines_.size() && i < kMaxListedErrors; ++i)
    text += (i ? "\n" : "") + lines_[i];
  if (lines_.size() > kMaxListedErrors)
    text += "\n... and " + std::to_string(lines_.size() - kMaxListedErrors) + " more errors";
  return invalid_argument(text);
}

MapReader::MapReader(SpecErrors& errors, const YAML::Node& node, std::string path)
    : errors_(errors), node_(node), path_(std::move(path)) {
  if (!node.IsMap()) {
    errors_.add(node, path_,
                std::string("expected a mapping (key: value lines), got ") + type_name(node));
    return;
  }
  is_map_ = true;
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const YAML::Node key = kv.first;  // a copy: yaml-cpp iterators hand out temporaries
    if (!key.IsScalar()) {
      errors_.add(key, path_, std::string("keys must be plain names, got ") + type_name(key));
      continue;
    }
    if (!seen.insert(key.Scalar()).second)
      errors_.add(key, path_, "duplicate key '" + key.Scalar() + "'");
  }
}

std::string MapReader::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

std::optional<YAML::Node> MapReader::find(const std::string& key) {
  known_.insert(key);
  if (!is_map_) return std::nullopt;
  for (const auto& kv : node_) {
    const YAML::Node k = kv.first;
    if (k.IsScalar() && k.Scalar() == key) return YAML::Node(kv.second);
  }
  return std::nullopt;
}

std::optional<YAML::Node> MapReader::get(const std::string& key, Need need) {
  auto v = find(key);
  if (!v && need == Need::kRequired && is_map_)
    errors_.add(node_, path_, "missing required key '" + key + "'");
  return v;
}

std::optional<std::string> MapReader::string(const std::string& key, Need need) {
  auto v = get(key, need);
  if (!v) return std::nullopt;
  if (!v->IsScalar()) {
    errors_.add(*v, key_path(key), std::string("expected text, got ") + type_name(*v));
    return std::nullopt;
  }
  return v->Scalar();
}

std::optional<int64_t> read_integer(SpecErrors& errors, const YAML::Node& node,
                                    const std::string& path, int64_t min, int64_t max) {
  long long value = 0;
  if (!node.IsScalar() || !YAML::convert<long long>::decode(node, value)) {
    errors.add(node, path, "expected a whole number, got " + quoted_scalar(node));
    return std::nullopt;
  }
  if (value < min || value > max) {
    errors.add(node, path,
               std::to_string(value) + " is out of range [" + std::to_string(min) + ", " +
                   std::to_string(max) + "]");
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> MapReader::integer(const std::string& key, int64_t min, int64_t max,
                                          Need need) {
  auto v = get(key, need);
  if (!v) return std::nullopt;
  return read_integer(errors_, *v, key_path(key), min, max);
}

std::optional<bool> MapReader::boolean(const std::string& key, Need need) {
  auto v = get(key, need);
  if (!v) return std::nullopt;
  bool value = false;
  if (!v->IsScalar() || !YAML::convert<bool>::decode(*v, value)) {
    errors_.add(*v, key_path(key), "expected true or false, got " + quoted_scalar(*v));
    return std::nullopt;
  }
  return value;
}

std::optional<uint64_t> MapReader::unsigned_integer(const std::string& key, Need need) {
  auto v = get(key, need);
  if (!v) return std::nullopt;
  unsigned long long value = 0;
  const bool negative = v->IsScalar() && !v->Scalar().empty() && v->Scalar()[0] == '-';
  if (!v->IsScalar() || negative || !YAML::convert<unsigned long long>::decode(*v, value)) {
    errors_.add(*v, key_path(key), "expected a whole number >= 0, got " + quoted_scalar(*v));
    return std::nullopt;
  }
  return value;
}

std::optional<double> MapReader::number(const std::string& key, double min, double max, Need need) {
  auto v = get(key, need);
  if (!v) return std::nullopt;
  double value = 0;
  if (!v->IsScalar() || !YAML::convert<double>::decode(*v, value) || !std::isfinite(value)) {
    errors_.add(*v, key_path(key), "expected a number, got " + quoted_scalar(*v));
    return std::nullopt;
  }
  if (value < min || value > max) {
    errors_.add(
        *v, key_path(key),
        v->Scalar() + " is out of range [" + format_number(min) + ", " + format_number(max) + "]");
    return std::nullopt;
  }
  return value;
}

void MapReader::report_unknown_keys() {
  if (!is_map_) return;
  for (const auto& kv : node_) {
    const YAML::Node key = kv.first;
    if (!key.IsScalar() || known_.count(key.Scalar())) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    errors_.add(key, path_, "unknown key '" + key.Scalar() + "' (known: " + list + ")");
  }
}

}  // namespace nj::jobs
