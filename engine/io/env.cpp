// The POSIX Env: write(2), fdatasync(2), rename(2), fsync(2) on directories.
#include "engine/io/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nj {
namespace {

Status posix_error(const std::string& what, const std::string& path, int err) {
  std::string m = path + ": " + what + " failed: " + std::strerror(err);
  if (err == ENOENT) return not_found(std::move(m));
  if (err == ENOSPC || err == EDQUOT) return resource_exhausted(std::move(m));
  return io_error(std::move(m));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status append(std::string_view data) override {
    if (fd_ < 0) return failed_precondition(path_ + ": append after close");
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t w = ::write(fd_, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return posix_error("write", path_, errno);
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    return Status();
  }

  Status sync() override {
    if (fd_ < 0) return failed_precondition(path_ + ": sync after close");
    if (::fdatasync(fd_) != 0) return posix_error("fdatasync", path_, errno);
    return Status();
  }

  Status close() override {
    if (fd_ < 0) return Status();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return posix_error("close", path_, errno);
    return Status();
  }

  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> new_writable_file(const std::string& path) override {
    // O_NOFOLLOW: a symlink planted where a file is to be created (a temp file's name)
    // must not redirect the write elsewhere.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return posix_error("create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<std::unique_ptr<WritableFile>> new_appendable_file(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return posix_error("open for append", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  Result<std::unique_ptr<RandomAccessFile>> open_read(const std::string& path) override {
    return open_random_access(path, IoMode::kBuffered);
  }

  Status rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return posix_error("rename to " + to, from, errno);
    return Status();
  }

  Status sync_dir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return posix_error("open directory", dir, errno);
    Status s;
    if (::fsync(fd) != 0) s = posix_error("fsync of directory", dir, errno);
    ::close(fd);
    return s;
  }

  Status remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return posix_error("remove", path, errno);
    return Status();
  }

  Result<std::vector<std::string>> children(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return posix_error("list directory", dir, errno);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
    return names;
  }

  bool exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
};

}  // namespace

Env* Env::posix() {
  static PosixEnv env;
  return &env;
}

std::string dir_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace nj
