// FaultEnv: an Env for tests that fails chosen operations and simulates a crash.
//
// Every mutating operation (create, open for append, append, sync, close, rename, directory
// sync, remove) gets an index, counted from construction or reset(). A test can
//   * fail one operation (fail_op): it returns an error, and an append may first write a
//     prefix of its data (a disk that fills up mid-write); later operations succeed;
//   * fail every operation of one kind (fail_every);
//   * crash at an operation (crash_at): it and every later one fail, as if the process died
//     there; lose_unsynced() then drops what a power loss would (file bytes past the last
//     fdatasync, renames and creations since the directory's last fsync).
// Reads, listings and existence checks pass through and never fail. File and directory
// syncs are tracked but not passed to the OS (the simulation, not the disk, decides what
// survives; real fsyncs would only make the tests slow) unless set_os_sync(true).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/io/env.h"

namespace nj::state_testing {

enum class FsOp { kCreate, kOpenAppend, kAppend, kSync, kClose, kRename, kSyncDir, kRemove };
const char* fs_op_name(FsOp op);

class FaultEnv : public EnvWrapper {
 public:
  explicit FaultEnv(Env* target = Env::posix()) : EnvWrapper(target) {}

  // Operation `index` fails with `code`; an append writes `partial_bytes` of its data first.
  void fail_op(uint64_t index, StatusCode code = StatusCode::kIOError, size_t partial_bytes = 0);
  // Every operation of kind `op` fails with `code` until reset().
  void fail_every(FsOp op, StatusCode code = StatusCode::kIOError);
  // Operation `index` and all after it fail ("simulated crash").
  void crash_at(uint64_t index);
  // Undoes what a power loss after the crash would lose. REQUIRES: the files written
  // through this Env are small (old contents of renamed-over files are kept in memory).
  void lose_unsynced();
  void set_os_sync(bool on) { os_sync_ = on; }
  // Clears faults, the operation count, the log and the byte count. What is synced and
  // what is not stays tracked (files written before reset() may still be lost).
  void reset();

  uint64_t ops() const { return next_op_; }
  // One line per operation: "<index> <op> <path>".
  const std::vector<std::string>& log() const { return log_; }
  // Bytes appended through this Env since the last reset().
  uint64_t appended_bytes() const { return appended_bytes_; }

  Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> new_appendable_file(const std::string& path) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status sync_dir(const std::string& dir) override;
  Status remove(const std::string& path) override;

 private:
  friend class FaultFile;
  struct Injected {
    StatusCode code;
    size_t partial_bytes;
  };
  // Counts the operation; returns the fault to inject, if any.
  std::optional<Injected> begin(FsOp op, const std::string& path);

  struct FileTrack {
    uint64_t size = 0;         // bytes in the file as written through this Env
    uint64_t synced_size = 0;  // bytes that survive a power loss
  };
  struct PendingRename {
    std::string from, to;
    std::optional<std::string> old_to;  // contents `to` had before, if it existed
  };

  bool os_sync_ = false;
  uint64_t next_op_ = 0;
  std::map<uint64_t, Injected> fail_at_;
  std::map<FsOp, StatusCode> fail_every_;
  std::optional<uint64_t> crash_at_;
  std::vector<std::string> log_;
  uint64_t appended_bytes_ = 0;

  std::map<std::string, FileTrack> files_;
  std::vector<std::string> created_;  // created since their directory's last sync
  std::vector<PendingRename> renames_;
};

}  // namespace nj::state_testing
