// Measures what a directory's filesystem can do: whether O_DIRECT works there and how
// fast cold reads are, with and without the page cache. Used by `nightjar doctor`, by
// the planner's default bandwidth and by benchmarks that state speed as a ratio to it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/util/status.h"

namespace nj {

struct DiskProbe {
  std::string dir;
  uint64_t probe_bytes = 0;  // size of the temporary file read
  bool odirect_supported = false;
  double direct_read_gbps =
      0;  // cold, O_DIRECT, 4 MiB reads on `threads` threads; 0 if unsupported
  double buffered_read_gbps = 0;  // cold (pages dropped with fadvise), buffered, same pattern
  double write_gbps = 0;          // writing the probe file, including fsync
};

struct DiskProbeOptions {
  uint64_t probe_bytes = 512ull << 20;  // large enough to pass device caches, small enough for ~1 s
  uint64_t chunk_bytes = 4ull << 20;    // the engine's typical expert read size order
  int threads = 4;                      // reads in flight; NVMe needs several to reach its rate
};

// Writes a temporary file in `dir`, measures, and removes it (also on failure).
// Errors: NotFound / IOError naming `dir` when it is missing, not a directory or not
// writable; ResourceExhausted when the free space is below twice the probe size.
Result<DiskProbe> probe_disk(const std::string& dir, const DiskProbeOptions& options = {});

// Reads [offset, offset + bytes) of an existing file (clipped to its end) with the probe's
// pattern and returns GB/s. When `drop_cache` is set the file's pages are dropped first
// (POSIX_FADV_DONTNEED), so buffered reads are cold. Used to measure the device on the
// model's own files (benchmarks, `plan SPEC --measure-disk`). REQUIRES: offset a multiple
// of 4096 when `direct`.
Result<double> measure_file_read_gbps(const std::string& path, bool direct, bool drop_cache,
                                      uint64_t bytes, const DiskProbeOptions& options = {},
                                      uint64_t offset = 0);

// Asks the kernel to drop a file's cached pages (no root needed). Best effort.
void drop_file_cache(const std::string& path);

}  // namespace nj
