// yaml-cpp adapter: parse text or files, converting exceptions to Status with positions.
#include "jobs/inputs/yaml_source.h"

#include <yaml-cpp/depthguard.h>

#include "engine/io/file.h"

namespace nj::jobs {

Result<YAML::Node> parse_yaml(const std::string& text, const std::string& name) {
  try {
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp says only "bad file" (a nesting bomb: [[[[...).
    return invalid_argument(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                            std::to_string(e.mark.column + 1) + ": the YAML nests deeper than " +
                            std::to_string(e.depth() - 1) +
                            " levels (a job spec needs a handful); refusing to parse it");
  } catch (const YAML::Exception& e) {
    // yaml-cpp marks are 0-based; editors count from 1.
    return invalid_argument(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                            std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Result<YAML::Node> load_yaml_file(const std::string& path) {
  NJ_ASSIGN_OR_RETURN(std::string text, read_small_file(path, 64u << 20));
  return parse_yaml(text, path);
}

std::string where(const std::string& name, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return name;
  return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

}  // namespace nj::jobs
