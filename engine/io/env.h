// Env: the file-system operations that persist things (LevelDB's Env, reduced to what
// Nightjar needs). Everything that writes goes through an Env so that tests can inject
// failures (a write that stops at ENOSPC, an fsync that reports EIO, a crash that loses
// unsynced data) without touching the code under test. Env::posix() is the real one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/io/file.h"
#include "engine/util/status.h"

namespace nj {

// A file open for sequential writing. Not thread-safe.
class WritableFile {
 public:
  virtual ~WritableFile() = default;

  // Appends `data` at the end of the file. On error (ENOSPC, EIO) some prefix of `data`
  // may have been written; the file's contents past the previous end are unspecified.
  virtual Status append(std::string_view data) = 0;
  // Makes everything appended so far durable (fdatasync). Does not cover the directory
  // entry of a new file: see Env::sync_dir.
  virtual Status sync() = 0;
  // Closes the file; further calls fail. The destructor closes silently if needed.
  virtual Status close() = 0;
  virtual const std::string& path() const = 0;
};

// Thread-safety: Env::posix() may be used from any thread; each returned file is not
// thread-safe. Errors are IOError (NotFound for a missing file) and name the path.
class Env {
 public:
  virtual ~Env() = default;

  // Creates `path`, or truncates it when it exists; never through a symlink (IOError).
  virtual Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) = 0;
  // Opens `path` for appending at its current end; NotFound when it does not exist.
  virtual Result<std::unique_ptr<WritableFile>> new_appendable_file(const std::string& path) = 0;
  // Opens `path` for positional reads (buffered).
  virtual Result<std::unique_ptr<RandomAccessFile>> open_read(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (rename(2)); both in the same file system.
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // Makes the directory's entries (creations, renames, removals) durable (fsync on the
  // directory).
  virtual Status sync_dir(const std::string& dir) = 0;
  // Removes a file; NotFound when it does not exist.
  virtual Status remove(const std::string& path) = 0;
  // The names (not paths) of the entries of `dir`, without "." and "..".
  virtual Result<std::vector<std::string>> children(const std::string& dir) = 0;
  virtual bool exists(const std::string& path) = 0;

  // The process-wide POSIX Env. Never null; not owned by the caller.
  static Env* posix();
};

// Forwards every call to another Env; fault-injecting and counting Envs derive from it
// and override what they change. `target` must outlive this object.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& p) override {
    return target_->new_writable_file(p);
  }
  Result<std::unique_ptr<WritableFile>> new_appendable_file(const std::string& p) override {
    return target_->new_appendable_file(p);
  }
  Result<std::unique_ptr<RandomAccessFile>> open_read(const std::string& p) override {
    return target_->open_read(p);
  }
  Status rename(const std::string& f, const std::string& t) override {
    return target_->rename(f, t);
  }
  Status sync_dir(const std::string& d) override { return target_->sync_dir(d); }
  Status remove(const std::string& p) override { return target_->remove(p); }
  Result<std::vector<std::string>> children(const std::string& d) override {
    return target_->children(d);
  }
  bool exists(const std::string& p) override { return target_->exists(p); }

 private:
  Env* target_;
};

// "dir/name" → "dir"; "name" → ".".
std::string dir_name(const std::string& path);
// "dir/name" → "name".
std::string base_name(const std::string& path);

}  // namespace nj
