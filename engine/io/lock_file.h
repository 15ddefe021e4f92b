// LockFile: an advisory lock held through an open file or directory, released when the
// LockFile is destroyed (closing the descriptor drops the process's locks on it). The runner's
// locks all come from here: the home's run.lock (`run --exclusive`), a job's prefix-state
// lock and a job's output directory.
//
// Two kinds, as the callers need them:
//   lock_exclusive()   flock(LOCK_EX), waiting: between processes on one host (and between
//                      two LockFiles of one process, which flock treats as strangers).
//   try_record_lock()  a POSIX record lock (fcntl F_SETLK) on the whole file, not waiting:
//                      the kind a shared filesystem's lock manager honours (NFS), for locks
//                      that must hold across hosts.
// Not thread-safe (one owner); movable, not copyable.
#pragma once

#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj {

class LockFile {
 public:
  // Opens `path` for locking: with `directory`, an existing directory (read-only); otherwise
  // a regular file, created (0600) when missing. IOError "PATH: cannot open[ WHAT]: REASON"
  // (`what`, e.g. "the home lock", names it in the message).
  static Result<LockFile> open(const std::string& path, bool directory = false,
                               std::string_view what = {});

  // Takes an exclusive flock, waiting while another open file holds one (EINTR is retried).
  // IOError "PATH: cannot lock: REASON".
  Status lock_exclusive();

  // Tries a record lock on the whole file: exclusive (a write lock) or shared (a read lock).
  // Returns 0 when taken, else the errno: EAGAIN or EACCES when another process holds a
  // conflicting lock, another (e.g. ENOLCK: no lock manager) when locks do not work there.
  int try_record_lock(bool exclusive);

  const std::string& path() const { return path_; }

  LockFile(LockFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
  LockFile& operator=(LockFile&&) = delete;
  LockFile(const LockFile&) = delete;
  ~LockFile();  // releases the lock

 private:
  LockFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// Opens `path` (a regular file, created when missing) and takes an exclusive flock on it,
// waiting. Errors as LockFile::open and lock_exclusive.
Result<LockFile> lock_file_exclusive(const std::string& path);

// mkdir(path, 0700); an existing directory is fine. IOError "PATH: cannot create WHAT: REASON".
Status make_directory(const std::string& path, std::string_view what = "directory");
// rmdir(path), best effort (a directory that is not empty, or gone, stays as it is).
void remove_empty_directory(const std::string& path);

}  // namespace nj
