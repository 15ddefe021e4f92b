// The yaml-cpp adapter: the only place yaml-cpp exceptions exist. Everything above it
// sees Status values whose messages carry "file:line:column". Private to nightjar_jobs
// (its header is never included from another layer).
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

#include "engine/util/status.h"

namespace nj::jobs {

// Parses a YAML document. `name` is used in messages (normally the file path).
// Returns InvalidArgument "<name>:<line>:<col>: <what>" on a syntax error.
Result<YAML::Node> parse_yaml(const std::string& text, const std::string& name);

// Reads and parses a YAML file. NotFound / IOError naming the path; syntax errors as above.
Result<YAML::Node> load_yaml_file(const std::string& path);

// "<name>:<line>:<col>" for a node (1-based), or "<name>" when the node has no mark.
std::string where(const std::string& name, const YAML::Node& node);

}  // namespace nj::jobs
