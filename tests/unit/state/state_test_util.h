// Helpers for the state checkpoint tests: models generated at test time, temporary
// directories, sessions run to a given position, and exact comparison of states.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/model.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/state/state_file.h"

namespace nj::state_testing {

// The directory of a model made by tests/reference/make_model.py with `preset` and `seed`,
// generated on first use into the build tree (safe when several test processes ask at
// once: each generates into its own directory and renames it into place). `vocab` > 0
// replaces the preset's vocabulary size.
std::string generated_model(const std::string& preset, int seed = 1, int vocab = 0);

// Opens a model; fails the test case when it cannot.
std::unique_ptr<Model> open_test_model(const std::string& dir);

// A fresh directory under the build tree, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::vector<std::string> names() const;  // sorted entries

 private:
  std::string path_;
};

// A session and sampler that generate, feeding every sampled token (so the state is the
// one a checkpoint saves). Prompt fed on construction.
struct Generation {
  Generation(Model& model, const std::vector<int32_t>& prompt, SamplingParams params);
  // Samples and feeds n tokens; returns them.
  std::vector<int32_t> step(int n);
  StateCheckpoint checkpoint() const {
    return {session.state(), {sampler.params(), sampler.rng()}};
  }
  Session session;
  Sampler sampler;
};

// Empty when equal bit for bit; otherwise what differs first.
std::string checkpoint_difference(const StateCheckpoint& a, const StateCheckpoint& b);

std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

}  // namespace nj::state_testing
