// The engine's only door to the disk. Everything that reads model bytes goes through a
// RandomAccessFile so that O_DIRECT, buffered fallback, fault injection and accounting
// live in one place; only engine/io calls pread() or opens with O_DIRECT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/util/status.h"

namespace nj {

// Alignment that O_DIRECT needs for buffer address, file offset and length on every
// Linux filesystem we target (the logical block size is 512 or 4096).
inline constexpr size_t kDirectAlign = 4096;

inline constexpr uint64_t align_down(uint64_t v, uint64_t a) {
  return v & ~(a - 1);
}
inline constexpr uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) & ~(a - 1);
}

// A read-only file with positional reads.
// Thread-safety: read_at may be called concurrently from many threads.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;

  // Reads exactly n bytes at `offset` into dst. A short read (end of file) or an OS error
  // returns IOError naming the file, the offset and the length; dst is then unspecified.
  // REQUIRES (when direct()): dst, offset and n are multiples of kDirectAlign, except
  // that n may end at the end of the file; dst then has room for n rounded up to
  // kDirectAlign (the device transfers whole blocks).
  virtual Status read_at(uint64_t offset, void* dst, size_t n) = 0;

  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
  // True when reads bypass the page cache (O_DIRECT).
  virtual bool direct() const = 0;
};

enum class IoMode {
  kBuffered,      // through the page cache
  kDirect,        // O_DIRECT; fails to open if the filesystem refuses it
  kPreferDirect,  // O_DIRECT where allowed, else buffered (the caller may log the fallback)
};

// Opens `path` for reading, without blocking (a FIFO is refused, never waited on).
// NotFound / IOError with the path on failure; InvalidArgument when it is not a regular file.
Result<std::unique_ptr<RandomAccessFile>> open_random_access(const std::string& path, IoMode mode);

// Reads a whole (small) file into a string: config files, headers, manifests.
Result<std::string> read_small_file(const std::string& path, size_t max_bytes = 256u << 20);

// Transparent huge pages: 2 MiB.
inline constexpr size_t kHugePageBytes = 2u << 20;

enum class PageSize {
  kAuto,  // huge pages for buffers of 2 huge pages or more, else 4 KiB pages
  kHuge,  // huge pages asked for whatever the size (the allocation rounds up to 2 MiB)
};

// Memory with kDirectAlign alignment for O_DIRECT buffers. Owns its bytes; movable.
// A buffer on huge pages sits on a 2 MiB boundary and holds align_up(n, kHugePageBytes) bytes
// of memory (size() is still n). Why huge pages for read buffers: on the project's benchmark
// host (a PVM guest, virtio disk of 254 segments per request) an O_DIRECT read into 4 KiB
// pages is cut into many small requests; 4 MiB reads of a lossless pack into 4 KiB pages took
// ~17 ms each against ~5-7 ms into huge pages (stream_bench --timeline, bench-8g, 420 MiB).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n, PageSize pages = PageSize::kAuto);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace nj
