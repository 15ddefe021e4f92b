// `run --exclusive`: one run process per home, enforced by a lock, so that the leases it
// finds can only be left over from runs that died (on this host or another). An array task
// of `nightjar slurm` runs this way: when Slurm requeues it onto another node, the items its
// killed predecessor held are taken over at once instead of after their lease expires.
//
// The lock is a POSIX record lock (fcntl F_SETLK on the whole file) on <home>/run.lock: a
// write lock for `run --exclusive`, a read lock for every other `run` (several may share a
// home), so an exclusive run waits for the others to end and they wait for it. The kernel drops it
// when the process dies; on a shared filesystem the server's lock manager does (NFS: when the dead
// client's lease lapses), which is why a home on a shared filesystem needs working POSIX locks.
#pragma once

#include "engine/io/lock_file.h"
#include "engine/util/status.h"
#include "runner/item/stop.h"
#include "runner/store/home.h"

namespace nj::runner {

class HomeLock {
 public:
  // Takes the lock (exclusive: a write lock; else a read lock), waiting (polling every
  // second) while a conflicting lock is held, until `stop` asks to stop: then Cancelled.
  // IOError naming the file when it cannot be opened or locked (e.g. ENOLCK: the filesystem
  // has no lock manager); a shared lock that cannot be taken is skipped with a warning instead
  // (plain runs worked before the lock existed).
  static Result<HomeLock> acquire(const Home& home, const StopControl& stop, bool exclusive);

  HomeLock(HomeLock&&) noexcept = default;
  HomeLock& operator=(HomeLock&&) = delete;
  HomeLock(const HomeLock&) = delete;
  // The destructor releases the lock.

 private:
  explicit HomeLock(LockFile file) : file_(std::move(file)) {}
  LockFile file_;
};

}  // namespace nj::runner
