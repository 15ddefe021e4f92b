// The home lock of `run` (fcntl record lock on <home>/run.lock).
#include "runner/home_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

namespace nj::runner {
namespace {

// 0 when locked, EAGAIN/EACCES when another process holds it, another errno otherwise.
int try_lock(int fd, bool exclusive) {
  struct flock fl = {};
  fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
  int rc;
  while ((rc = ::fcntl(fd, F_SETLK, &fl)) != 0 && errno == EINTR) {
  }
  return rc == 0 ? 0 : errno;
}

}  // namespace

Result<HomeLock> HomeLock::acquire(const Home& home, const StopControl& stop, bool exclusive) {
  const std::string path = home.path("run.lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return io_error(path + ": cannot open the home lock: " + std::strerror(errno));
  HomeLock lock(fd);
  bool said = false;
  for (;;) {
    const int err = try_lock(fd, exclusive);
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

HomeLock::~HomeLock() {
  if (fd_ >= 0) ::close(fd_);  // closing any descriptor of the file drops the process's locks
}

}  // namespace nj::runner
