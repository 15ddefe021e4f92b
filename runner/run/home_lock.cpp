// The home lock of `run` (fcntl record lock on <home>/run.lock, engine/io/lock_file.h).
#include "runner/run/home_lock.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

namespace nj::runner {

Result<HomeLock> HomeLock::acquire(const Home& home, const StopControl& stop, bool exclusive) {
  const std::string path = home.path("run.lock");
  NJ_ASSIGN_OR_RETURN(LockFile file, LockFile::open(path, false, "the home lock"));
  HomeLock lock(std::move(file));
  bool said = false;
  for (;;) {
    const int err = lock.file_.try_record_lock(exclusive);
    if (err == 0) break;
    if (err != EAGAIN && err != EACCES && !exclusive) {
      spdlog::warn("{}: cannot take the shared home lock ({}); going on without it", path,
                   std::strerror(err));
      break;
    }
    if (err != EAGAIN && err != EACCES)
      return io_error(path + ": cannot lock the home (" + std::strerror(err) +
                      "); --exclusive needs POSIX locks on the home's filesystem");
    if (!said) {
      spdlog::warn("{} is held by {}: waiting for it to end", path,
                   exclusive ? "another run" : "an exclusive run");
      said = true;
    }
    if (auto reason = stop.reason())
      return cancelled("stopped (" + *reason + ") waiting for " + path);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return lock;
}

}  // namespace nj::runner
