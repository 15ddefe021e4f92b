// Disk probe: write a temporary file, drop it from the page cache, time cold reads.
#include "engine/io/probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "engine/io/file.h"
#include "engine/io/sysinfo.h"

namespace nj {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Removes the file when it goes out of scope.
struct TempFileGuard {
  std::string path;
  ~TempFileGuard() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

Status write_probe_file(const std::string& path, int fd, uint64_t bytes, double* gbps) {
  AlignedBuffer chunk(4u << 20);
  // Incompressible-ish content so that no layer of the stack can shortcut the reads.
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto* words = reinterpret_cast<uint64_t*>(chunk.data());
  for (size_t i = 0; i < chunk.size() / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    words[i] = x;
  }
  auto t0 = Clock::now();
  for (uint64_t done = 0; done < bytes;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - done));
    words[0] = done;  // every chunk differs
    ssize_t w = ::pwrite(fd, chunk.data(), n, static_cast<off_t>(done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error(path + ": write failed at offset " + std::to_string(done) + ": " +
                      std::strerror(errno));
    }
    done += static_cast<uint64_t>(w);
  }
  if (::fsync(fd) != 0) return io_error(path + ": fsync failed: " + std::strerror(errno));
  *gbps = static_cast<double>(bytes) / seconds_since(t0) / 1e9;
  return Status();
}

}  // namespace

void drop_file_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

Result<double> measure_file_read_gbps(const std::string& path, bool direct, bool drop_cache,
                                      uint64_t bytes, const DiskProbeOptions& options,
                                      uint64_t offset) {
  if (drop_cache) drop_file_cache(path);
  NJ_ASSIGN_OR_RETURN(auto file,
                      open_random_access(path, direct ? IoMode::kDirect : IoMode::kBuffered));
  const uint64_t size = file->size();
  offset = std::min(offset, size);
  bytes = std::min(bytes, size - offset);
  const uint64_t chunk = options.chunk_bytes;
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  Status first_error;
  std::mutex error_mu;
  auto t0 = Clock::now();
  auto read_chunks = [&] {
    AlignedBuffer buf(chunk);
    for (uint64_t c; !failed && (c = next.fetch_add(1)) < chunks;) {
      const uint64_t off = c * chunk;
      size_t n = static_cast<size_t>(std::min(chunk, bytes - off));
      if (direct && offset + off + n < size)
        n = static_cast<size_t>(std::min<uint64_t>(align_up(n, kDirectAlign), size - offset - off));
      Status s = file->read_at(offset + off, buf.data(), n);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!failed.exchange(true)) first_error = s;
      }
    }
  };
  std::vector<std::thread> workers;
  Status no_thread;
  for (int t = 0; t < std::max(1, options.threads); ++t) {
    try {
      workers.emplace_back(read_chunks);
    } catch (const std::system_error& e) {
      no_thread = resource_exhausted("cannot start probe thread " + std::to_string(t + 1) + ": " +
                                     e.what());
      failed = true;
      break;
    }
  }
  for (auto& w : workers) w.join();
  if (!no_thread.ok()) return no_thread;
  if (failed) return first_error;
  double secs = seconds_since(t0);
  return static_cast<double>(bytes) / std::max(secs, 1e-9) / 1e9;
}

Result<DiskProbe> probe_disk(const std::string& dir, const DiskProbeOptions& options) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return not_found(dir + ": no such directory");
    return io_error(dir + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return invalid_argument(dir + ": not a directory");
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0)
    return io_error(dir + ": not readable and writable: " + std::strerror(errno));

  NJ_ASSIGN_OR_RETURN(DiskSpace space, disk_space(dir));
  DiskProbe probe;
  probe.dir = dir;
  probe.probe_bytes = options.probe_bytes;
  if (space.free_bytes / 2 < probe.probe_bytes) {
    // Shrink rather than fail while a meaningful measurement is still possible.
    probe.probe_bytes = align_down(space.free_bytes / 4, 4u << 20);
    if (probe.probe_bytes < (16u << 20))
      return resource_exhausted(dir + ": only " + std::to_string(space.free_bytes) +
                                " bytes free, too little to measure read bandwidth");
  }

  std::string tmpl = dir + "/.nightjar-probe-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return io_error(dir + ": cannot create a temporary file: " + std::strerror(errno));
  TempFileGuard guard{tmpl};
  Status ws = write_probe_file(tmpl, fd, probe.probe_bytes, &probe.write_gbps);
  ::close(fd);
  NJ_RETURN_IF_ERROR(ws);

  auto direct_file = open_random_access(tmpl, IoMode::kDirect);
  probe.odirect_supported = direct_file.ok();
  if (probe.odirect_supported) {
    NJ_ASSIGN_OR_RETURN(probe.direct_read_gbps,
                        measure_file_read_gbps(tmpl, true, true, probe.probe_bytes, options));
  }
  NJ_ASSIGN_OR_RETURN(probe.buffered_read_gbps,
                      measure_file_read_gbps(tmpl, false, true, probe.probe_bytes, options));
  return probe;
}

}  // namespace nj
