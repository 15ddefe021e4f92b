// LockFile and the directories locks live in (see lock_file.h).
#include "engine/io/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nj {

Result<LockFile> LockFile::open(const std::string& path, bool directory, std::string_view what) {
  const int fd = directory ? ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                           : ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string message = path + ": cannot open";
    if (!what.empty()) message += " " + std::string(what);
    return io_error(message + ": " + std::strerror(errno));
  }
  return LockFile(path, fd);
}

Status LockFile::lock_exclusive() {
  while (::flock(fd_, LOCK_EX) != 0)
    if (errno != EINTR) return io_error(path_ + ": cannot lock: " + std::strerror(errno));
  return Status();
}

int LockFile::try_record_lock(bool exclusive) {
  struct flock fl = {};
  fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
  int rc;
  while ((rc = ::fcntl(fd_, F_SETLK, &fl)) != 0 && errno == EINTR) {
  }
  return rc == 0 ? 0 : errno;
}

LockFile::~LockFile() {
  if (fd_ >= 0) ::close(fd_);  // closing any descriptor of the file drops the process's locks
}

Result<LockFile> lock_file_exclusive(const std::string& path) {
  NJ_ASSIGN_OR_RETURN(LockFile lock, LockFile::open(path));
  NJ_RETURN_IF_ERROR(lock.lock_exclusive());
  return lock;
}

Status make_directory(const std::string& path, std::string_view what) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return Status();
  return io_error(path + ": cannot create " + std::string(what) + ": " + std::strerror(errno));
}

void remove_empty_directory(const std::string& path) { (void)::rmdir(path.c_str()); }

}  // namespace nj
