// Home directory resolution and creation.
#include "runner/store/home.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/io/lock_file.h"

namespace nj::runner {
namespace {

Status make_dir(const std::string& path) { return make_directory(path, "directory"); }

}  // namespace

void add_home_option(CLI::App& sub, std::string& home_flag) {
  sub.add_option("--home", home_flag,
                 "Home directory of the job store, checkpoints and logs "
                 "(default: $NIGHTJAR_HOME, else ~/.local/share/nightjar)");
}

Result<Home> resolve_home(const std::string& flag) {
  std::string dir = flag;
  if (dir.empty()) {
    if (const char* env = std::getenv("NIGHTJAR_HOME"); env && *env) dir = env;
  }
  if (dir.empty()) {
    const char* home = std::getenv("HOME");
    if (!home || !*home)
      return invalid_argument("no home directory: give --home DIR or set NIGHTJAR_HOME");
    dir = std::string(home) + "/.local/share/nightjar";
  }
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) return invalid_argument(dir + ": " + ec.message());
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return Home{s};
}

Result<std::unique_ptr<JobStore>> open_home_store(const Home& home, bool create,
                                                  StoreOptions options) {
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(home.dir, ec);
    if (ec) return io_error(home.dir + ": cannot create the home directory: " + ec.message());
    NJ_RETURN_IF_ERROR(make_dir(home.dir + "/logs"));
    NJ_RETURN_IF_ERROR(make_dir(home.dir + "/checkpoints"));
  } else if (!std::filesystem::exists(home.db_path())) {
    return not_found("no job store in " + home.dir +
                     " (nothing submitted yet? --home or NIGHTJAR_HOME choose another home)");
  }
  return JobStore::open(home.db_path(), create, std::move(options));
}

}  // namespace nj::runner
