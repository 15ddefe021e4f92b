// POSIX implementation of RandomAccessFile (pread, optionally O_DIRECT).
#include "engine/io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace nj {
namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size, bool direct)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status read_at(uint64_t offset, void* dst, size_t n) override {
    auto* out = static_cast<uint8_t*>(dst);
    // O_DIRECT transfers whole blocks: a read that ends at the end of the file asks for the
    // rest of the last block and gets exactly the file's remaining bytes.
    const size_t request =
        direct_ && offset + n == size_ ? static_cast<size_t>(align_up(n, kDirectAlign)) : n;
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, out + done, request - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return io_error(path_ + ": read of " + std::to_string(n) + " bytes at offset " +
                        std::to_string(offset) + " failed: " + errno_text(errno));
      }
      if (r == 0) {
        return io_error(path_ + ": short read at offset " + std::to_string(offset + done) +
                        " (wanted " + std::to_string(n) + " bytes from offset " +
                        std::to_string(offset) + ", file is " + std::to_string(size_) + " bytes)");
      }
      done += static_cast<size_t>(r);
    }
    return Status();
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
  bool direct_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> open_random_access(const std::string& path, IoMode mode) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever; the
  // fstat below then refuses anything but a regular file. It changes nothing for a regular
  // file's reads, and is cleared all the same.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
  bool direct = mode != IoMode::kBuffered;
  int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0));
  if (fd < 0 && direct && errno == EINVAL && mode == IoMode::kPreferDirect) {
    direct = false;
    fd = ::open(path.c_str(), flags);
  }
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return not_found(path + ": no such file");
    if (err == EINVAL && direct) return io_error(path + ": the filesystem refuses O_DIRECT");
    return io_error(path + ": cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error(path + ": cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(path + ": not a regular file (a directory, FIFO, socket or device)");
  }
  (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return std::unique_ptr<RandomAccessFile>(
      new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size), direct));
}

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  NJ_ASSIGN_OR_RETURN(auto file, open_random_access(path, IoMode::kBuffered));
  if (file->size() > max_bytes)
    return invalid_argument(path + ": file is " + std::to_string(file->size()) +
                            " bytes, more than the " + std::to_string(max_bytes) + " expected");
  std::string text(file->size(), '\0');
  NJ_RETURN_IF_ERROR(file->read_at(0, text.data(), text.size()));
  return text;
}

AlignedBuffer::AlignedBuffer(size_t n, PageSize pages) : n_(n) {
  if (n == 0) return;
  // Large buffers (weights) sit on 2 MiB boundaries and ask for transparent huge pages:
  // kernels streaming hundreds of MB through the TLB run measurably faster on them.
  constexpr size_t kHuge = kHugePageBytes;
  const size_t align = n >= 2 * kHuge || pages == PageSize::kHuge ? kHuge : kDirectAlign;
  const size_t bytes = align_up(n, align);
  p_ = static_cast<uint8_t*>(std::aligned_alloc(align, bytes));
  if (!p_) throw std::bad_alloc();
  if (align == kHuge) ::madvise(p_, bytes, MADV_HUGEPAGE);  // advice only; failure is harmless
  // Fault every page in from user space now, with a write, rather than leaving the first
  // touch to the kernel inside a read into the buffer. On the project's benchmark host (a PVM
  // guest), 4 KiB pages that a read faulted in stayed ~20x slower for the CPU to read
  // afterwards: an MXFP4 expert group over bench-8g's bytes took 440-710 ms per 192 experts
  // in such pages, 22-35 ms in pages touched first (or huge pages). Resident bench-8g's
  // expert products at B = 1 went from 0.49 to 0.25 s per pass. Elsewhere it moves page
  // faults forward and makes the whole buffer resident at once, which the budget counts.
  volatile uint8_t* touch = p_;
  for (size_t at = 0; at < bytes; at += kDirectAlign) touch[at] = 0;  // 4 KiB pages
}

AlignedBuffer::~AlignedBuffer() {
  std::free(p_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
  o.p_ = nullptr;
  o.n_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    std::free(p_);
    p_ = o.p_;
    n_ = o.n_;
    o.p_ = nullptr;
    o.n_ = 0;
  }
  return *this;
}

}  // namespace nj
