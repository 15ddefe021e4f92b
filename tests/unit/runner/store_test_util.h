// Helpers for the job store tests: small jobs, a store on a test clock, owner predicates.
#pragma once

#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "runner/store/job_store.h"

namespace nj::runner {

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
    job.items.push_back(NewItem{"item-" + std::to_string(i), std::nullopt, {1, 2},
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

inline bool alive_all(const std::string&) { return true; }
inline bool alive_none(const std::string&) { return false; }

}  // namespace nj::runner
