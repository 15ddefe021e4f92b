// Helpers for the job store tests: temporary directories, small jobs, a store on a test
// clock, owner predicates.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "runner/store/job_store.h"

namespace nj::runner {

// A fresh directory under the build tree (NJ_TEST_WORK_DIR), removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::filesystem::create_directories(NJ_TEST_WORK_DIR);
    std::string pattern = std::string(NJ_TEST_WORK_DIR) + "/store-XXXXXX";
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A generate job of `items` items (custom ids item-0, item-1, ...; prompt [1, 2]; max_tokens 10).
inline NewJob test_job(const std::string& name, int items, int max_attempts = 3, int priority = 0) {
  NewJob job;
  job.name = name;
  job.kind = "generate";
  job.model_dir = "/models/test";
  job.max_attempts = max_attempts;
  job.priority = priority;
  job.spec_path = "/specs/" + name + ".yaml";
  job.settings_json = "{}";
  for (int i = 0; i < items; ++i)
    job.items.push_back(
        NewItem{"item-" + std::to_string(i),
                std::nullopt,
                {1, 2},
                R"({"max_tokens":10,"temperature":0,"top_k":0,"top_p":1,"seed":0})"});
  return job;
}

// A store whose clock reads `now` (the test advances it).
inline std::unique_ptr<JobStore> open_with_clock(const std::string& path, const double& now) {
  StoreOptions options;
  options.clock = [&now] { return now; };
  auto store = JobStore::open(path, true, options);
  REQUIRE(store.ok());
  return std::move(*store);
}

inline bool alive_all(const std::string&) {
  return true;
}
inline bool alive_none(const std::string&) {
  return false;
}

}  // namespace nj::runner
