// The output-path policy: resolution, containment, homes, protected files.
#include "jobs/spec/output_paths.h"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "jobs/spec/job_spec.h"

namespace nj::jobs {
namespace {

namespace fs = std::filesystem;

std::string strip_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// True when `path` lies strictly below `dir` (both resolved).
bool below(const std::string& path, const std::string& dir) {
  const fs::path p(path), d(dir);
  auto pi = p.begin();
  for (const fs::path& part : d) {
    if (part.empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != part) return false;
    ++pi;
  }
  return pi != p.end();
}

bool same_file(const std::string& resolved, const std::string& other) {
  if (resolved == resolve_path(other)) return true;
  std::error_code ec;
  return fs::exists(resolved, ec) && fs::exists(other, ec) && fs::equivalent(resolved, other, ec);
}

// The files `pattern` matches now (resolved), for a comparison that sees through symlinks.
std::vector<std::string> glob_matches(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(resolve_path(g.gl_pathv[i]));
  ::globfree(&g);
  return out;
}

bool matches_glob(const std::string& path, const std::string& resolved,
                  const std::string& pattern) {
  const int flags = FNM_PATHNAME | FNM_PERIOD;
  if (::fnmatch(pattern.c_str(), path.c_str(), flags) == 0 ||
      ::fnmatch(pattern.c_str(), resolved.c_str(), flags) == 0)
    return true;
  for (const std::string& m : glob_matches(pattern))
    if (m == resolved) return true;
  return false;
}

// The nearest directory at or above `dir` that holds `store_file` (a home), if any.
std::optional<std::string> enclosing_home(const std::string& dir, const std::string& store_file) {
  if (store_file.empty()) return std::nullopt;
  std::error_code ec;
  for (fs::path d(dir);; d = d.parent_path()) {
    if (fs::exists(d / store_file, ec)) return d.string();
    if (d == d.parent_path() || d.empty()) return std::nullopt;
  }
}

std::vector<std::string> strings_of(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key)) out = j.at(key).get<std::vector<std::string>>();
  return out;
}

}  // namespace

nlohmann::json output_rules_to_json(const OutputRules& r) {
  return {{"spec_dir", r.spec_dir},
          {"allowed_dirs", r.allowed_dirs},
          {"homes", r.homes},
          {"store_file", r.store_file},
          {"spec_file", r.spec_file},
          {"input_files", r.input_files},
          {"input_globs", r.input_globs}};
}

Result<OutputRules> output_rules_from_json(const nlohmann::json& j) {
  OutputRules r;
  try {
    r.spec_dir = j.at("spec_dir").get<std::string>();
    r.store_file = j.value("store_file", std::string());
    r.allowed_dirs = strings_of(j, "allowed_dirs");
    r.homes = strings_of(j, "homes");
    r.spec_file = j.value("spec_file", std::string());
    r.input_files = strings_of(j, "input_files");
    r.input_globs = strings_of(j, "input_globs");
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("output rules: ") + e.what());
  }
  return r;
}

std::string resolve_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) p = fs::path(path);
  // Component by component, as the kernel resolves a path, following every symlink, also
  // one whose target does not exist yet (weakly_canonical stops at the first missing part,
  // so a link to <home>/nightjar.db of a home not yet created would resolve to itself).
  std::vector<fs::path> todo(p.begin(), p.end());
  std::reverse(todo.begin(), todo.end());  // a stack: the next component last
  fs::path out = "/";
  int links = 0;
  while (!todo.empty()) {
    const fs::path part = todo.back();
    todo.pop_back();
    if (part.empty() || part == "." || part == "/") continue;
    if (part == "..") {
      out = out.parent_path();
      continue;
    }
    const fs::path next = out / part;
    if (links < 40 && fs::is_symlink(fs::symlink_status(next, ec))) {
      const fs::path target = fs::read_symlink(next, ec);
      if (!ec) {
        ++links;
        if (target.is_absolute()) out = "/";
        for (auto it = target.end(); it != target.begin();) todo.push_back(*--it);
        continue;
      }
    }
    out = next;
  }
  return strip_slashes(out.lexically_normal().string());
}

std::optional<std::string> home_containing(const std::string& path,
                                           const std::vector<std::string>& homes,
                                           const std::string& store_file) {
  const std::string resolved = resolve_path(path);
  for (const std::string& home : homes) {
    const std::string h = resolve_path(home);
    if (resolved == h || below(resolved, h)) return h;
  }
  return enclosing_home(fs::path(resolved).parent_path().string(), store_file);
}

Result<std::string> check_output_path(const std::string& path, const OutputRules& rules) {
  const std::string resolved = resolve_path(path);
  const std::string spec_dir = resolve_path(rules.spec_dir);
  if (auto home = home_containing(resolved, rules.homes, rules.store_file))
    return invalid_argument("resolves to " + resolved + ", inside the home " + *home +
                            " (a job store's directory): outputs never go into a home");
  bool allowed = below(resolved, spec_dir);
  for (const std::string& dir : rules.allowed_dirs)
    allowed = allowed || below(resolved, resolve_path(dir));
  if (!allowed)
    return invalid_argument("resolves to " + resolved + ", outside the spec's directory " +
                            spec_dir + " (submit --allow-outputs DIR allows another directory)");
  if (!rules.spec_file.empty() && same_file(resolved, rules.spec_file))
    return invalid_argument("resolves to " + resolved +
                            ", which is the job's spec: an output never replaces it");
  for (const std::string& input : rules.input_files)
    if (same_file(resolved, input))
      return invalid_argument("resolves to " + resolved +
                              ", which is one of the job's inputs: an output never replaces one");
  for (const std::string& pattern : rules.input_globs)
    if (matches_glob(path, resolved, pattern))
      return invalid_argument("resolves to " + resolved + ", which the job's inputs glob '" +
                              pattern + "' matches: an output never replaces an input");
  std::error_code ec;
  const fs::file_status st = fs::status(resolved, ec);
  if (fs::exists(st) && !fs::is_regular_file(st))
    return invalid_argument(
        "resolves to " + resolved +
        ", which exists and is not a regular file (a directory, FIFO or device)");
  return resolved;
}

Status check_declared_outputs(JobSpec& spec, const std::vector<std::string>& allowed_dirs,
                              const std::vector<std::string>& homes,
                              const std::string& store_file) {
  if (!spec.classify) return Status();
  ClassifySpec& c = *spec.classify;
  OutputRules rules;
  rules.spec_dir = c.spec_dir;
  for (const std::string& dir : allowed_dirs) rules.allowed_dirs.push_back(resolve_path(dir));
  for (const std::string& home : homes) rules.homes.push_back(resolve_path(home));
  rules.store_file = store_file;
  rules.spec_file = resolve_path(spec.source);
  if (c.input_jsonl) rules.input_files.push_back(*c.input_jsonl);
  if (c.input_glob) rules.input_globs.push_back(*c.input_glob);
  c.output_rules = rules;

  std::string errors;
  auto check = [&](const std::optional<std::string>& path, const std::string& where,
                   const char* key) -> std::optional<std::string> {
    if (!path) return std::nullopt;
    auto resolved = check_output_path(*path, rules);
    if (resolved.ok()) return *resolved;
    errors += (errors.empty() ? "" : "\n") + where + ": outputs." + key + ": " +
              resolved.status().message();
    return std::nullopt;
  };
  auto jsonl = check(c.output_jsonl, c.output_jsonl_where, "jsonl");
  auto csv = check(c.output_csv, c.output_csv_where, "csv");
  if (jsonl && csv && *jsonl == *csv)
    errors += (errors.empty() ? "" : "\n") + c.output_csv_where +
              ": outputs.csv: names the same file as outputs.jsonl (" + *csv +
              "); give each output its own file";
  return errors.empty() ? Status() : invalid_argument(errors);
}

Status check_openai_outputs(JobSpec& spec, const std::string& output_file,
                            const std::optional<std::string>& error_file,
                            const std::vector<std::string>& homes, const std::string& store_file) {
  OpenAiOutputs o;
  o.output_file = resolve_path(output_file);
  if (error_file) o.error_file = resolve_path(*error_file);
  OutputRules& rules = o.rules;
  rules.spec_dir = std::filesystem::path(o.output_file).parent_path().string();
  if (o.error_file)
    rules.allowed_dirs.push_back(std::filesystem::path(*o.error_file).parent_path().string());
  for (const std::string& home : homes) rules.homes.push_back(resolve_path(home));
  rules.store_file = store_file;
  rules.spec_file = resolve_path(spec.source);
  rules.input_files.push_back(rules.spec_file);
  std::string errors;
  auto check = [&](const std::string& path, const char* flag) -> std::optional<std::string> {
    auto resolved = check_output_path(path, rules);
    if (resolved.ok()) return *resolved;
    errors += (errors.empty() ? "" : "\n") + std::string(flag) + " " + path + ": " +
              resolved.status().message();
    return std::nullopt;
  };
  auto out = check(o.output_file, "--output-file");
  auto err = o.error_file ? check(*o.error_file, "--error-file") : std::nullopt;
  if (out && err && *out == *err)
    errors += (errors.empty() ? "" : "\n") + std::string("--error-file ") + *o.error_file +
              ": names the same file as --output-file; give each its own file";
  if (!errors.empty()) return invalid_argument(errors);
  spec.openai_outputs = std::move(o);
  return Status();
}

}  // namespace nj::jobs
