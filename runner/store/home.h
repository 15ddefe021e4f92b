// The home directory: where the job store, state checkpoints and logs of `submit`/`run`/
// `status`/... live. Chosen by --home, else $NIGHTJAR_HOME, else ~/.local/share/nightjar.
//
//   <home>/nightjar.db (+ -wal, -shm)       the job store (runner/store/job_store.h)
//   <home>/checkpoints/item-<id>/pos-<P>.state   state checkpoints of unfinished items
//   <home>/logs/nightjar.log                what `run` logged, appended
#pragma once

#include <memory>
#include <string>

#include "engine/util/status.h"
#include "runner/store/job_store.h"

namespace CLI {
class App;
}

namespace nj::runner {

struct Home {
  // The job store's file name: a directory holding it is a home (outputs never go there).
  static constexpr const char* kStoreFile = "nightjar.db";

  std::string dir;  // absolute

  std::string db_path() const { return dir + "/" + kStoreFile; }
  std::string log_path() const { return dir + "/logs/nightjar.log"; }
  // A path below the home, from the relative form the store records.
  std::string path(const std::string& relative) const { return dir + "/" + relative; }
  // Relative directory of one item's checkpoint files.
  static std::string checkpoint_dir(int64_t item_id) {
    return "checkpoints/item-" + std::to_string(item_id);
  }
};

// Adds --home DIR to a subcommand.
void add_home_option(CLI::App& sub, std::string& home_flag);

// The home directory from the flag (may be empty), $NIGHTJAR_HOME or $HOME. InvalidArgument
// when none is set.
Result<Home> resolve_home(const std::string& flag);

// Opens the home's store. With `create`, creates the directory tree (mode 0700) and the store
// when missing; without, NotFound names the home ("nothing submitted yet?").
Result<std::unique_ptr<JobStore>> open_home_store(const Home& home, bool create,
                                                  StoreOptions options = {});

}  // namespace nj::runner
