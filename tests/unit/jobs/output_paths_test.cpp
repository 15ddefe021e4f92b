// The output-path policy's resolution (jobs/spec/output_paths.h): symlinks are followed as
// the kernel follows them, also into directories that do not exist yet.
#include "jobs/spec/output_paths.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

namespace nj::jobs {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the build tree (NJ_TEST_WORK_DIR), removed on destruction.
struct ScratchDir {
  ScratchDir() {
    fs::create_directories(NJ_TEST_WORK_DIR);
    std::string pattern = std::string(NJ_TEST_WORK_DIR) + "/paths-XXXXXX";
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = fs::canonical(pattern).string();
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

TEST_CASE("a symlink into a home not created yet resolves to its target (issue 35, item 7)",
          "[jobs][outputs]") {
  ScratchDir d;
  const std::string home = d.path + "/home", store = home + "/nightjar.db";
  fs::create_directories(d.path + "/spec/out");
  fs::create_symlink(store, d.path + "/spec/out/labels.jsonl");  // dangling: no home yet
  CHECK(resolve_path(d.path + "/spec/out/labels.jsonl") == store);
  // A relative link, through a linked directory, with `..` after it.
  fs::create_symlink("../../home", d.path + "/spec/out/h");
  CHECK(resolve_path(d.path + "/spec/out/h/nightjar.db") == store);
  CHECK(resolve_path(d.path + "/spec/out/h/../spec/x") == d.path + "/spec/x");
  // A loop ends; nothing that exists changes.
  fs::create_symlink(d.path + "/spec/loop", d.path + "/spec/loop");
  CHECK_NOTHROW(resolve_path(d.path + "/spec/loop/x"));
  CHECK(resolve_path(d.path + "/spec/out/./") == d.path + "/spec/out");

  OutputRules rules;
  rules.spec_dir = d.path + "/spec";
  rules.homes = {home};
  rules.store_file = "nightjar.db";
  auto checked = check_output_path(d.path + "/spec/out/labels.jsonl", rules);
  REQUIRE_FALSE(checked.ok());
  CHECK(checked.status().message().find("inside the home") != std::string::npos);
  CHECK(check_output_path(d.path + "/spec/out/real.jsonl", rules).ok());
}

}  // namespace
}  // namespace nj::jobs
