// MappedFile: mmap(PROT_READ, MAP_PRIVATE | MAP_POPULATE) of a file range.
#include "engine/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace nj {

Result<MappedFile> MappedFile::map(const std::string& path, uint64_t offset, uint64_t length) {
  // O_NONBLOCK: a FIFO must be refused (below), not waited on in open(2).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return not_found(path + ": no such file");
    return io_error(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + ": not a regular file (a directory, FIFO, socket or device)");
  }
  if (offset + length > static_cast<uint64_t>(st.st_size)) {
    ::close(fd);
    return invalid_argument(path + ": range " + std::to_string(offset) + "+" + std::to_string(length) +
                            " runs past the end of the file (" + std::to_string(st.st_size) + " bytes)");
  }
  MappedFile m;
  m.length_ = static_cast<size_t>(length);
  if (length == 0) {
    ::close(fd);
    m.data_ = "";
    return m;
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  m.map_length_ = static_cast<size_t>(offset + length - start);
  m.base_ = ::mmap(nullptr, m.map_length_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, static_cast<off_t>(start));
  const int err = errno;
  ::close(fd);
  if (m.base_ == MAP_FAILED) {
    m.base_ = nullptr;
    return io_error(path + ": mmap failed: " + std::strerror(err));
  }
  m.data_ = static_cast<const char*>(m.base_) + (offset - start);
  return m;
}

MappedFile::~MappedFile() {
  if (base_) ::munmap(base_, map_length_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, map_length_);
    base_ = std::exchange(o.base_, nullptr);
    map_length_ = std::exchange(o.map_length_, 0);
    data_ = std::exchange(o.data_, nullptr);
    length_ = std::exchange(o.length_, 0);
  }
  return *this;
}

}  // namespace nj
