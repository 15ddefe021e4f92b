// Facts about the machine: memory, free disk, peak RSS, and a memory-bandwidth probe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj {

struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable: what can be used without swapping
};

// From /proc/meminfo. IOError if it cannot be read.
Result<MemoryInfo> memory_info();

// Finds "<key>: <n> kB" in the text of a /proc file (meminfo, self/status) and returns
// n * 1024; nullopt when the key is absent or its value is not a number.
std::optional<uint64_t> parse_proc_kb(std::string_view text, std::string_view key);

// What this process can still allocate, in bytes: MemAvailable, and no more than its
// address-space limit (RLIMIT_AS) leaves beyond what it maps now. 0 when unknown.
uint64_t free_memory_bytes();

// Parses the text of /proc/meminfo. InvalidArgument when MemTotal is missing.
Result<MemoryInfo> parse_meminfo(std::string_view text);

struct DiskSpace {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to an unprivileged user
};

// statvfs on `dir`. NotFound / IOError naming the directory.
Result<DiskSpace> disk_space(const std::string& dir);

// Peak resident set size of this process so far (VmHWM), in bytes; 0 if unknown.
uint64_t peak_rss_bytes();
// Current resident set size (VmRSS), in bytes; 0 if unknown.
uint64_t current_rss_bytes();

// Memory read bandwidth: streams a buffer of `bytes` on `threads` threads (static split,
// summing words). The buffer is allocated like the engine's weights (2 MiB aligned, huge
// pages advised) so kernels are compared with memory as they see it.
class MemoryProbe {
 public:
  MemoryProbe(uint64_t bytes, int threads);
  ~MemoryProbe();
  // One timed pass, in GB/s. Benchmarks interleave passes with the work they compare.
  double measure_once();

 private:
  struct Impl;
  Impl* impl_;
};

// The median of `repeats` passes of a MemoryProbe, in GB/s.
double measure_memory_read_gbps(uint64_t bytes, int threads, int repeats = 5);

// Number of online CPUs.
int cpu_count();

// Model name from /proc/cpuinfo, or "unknown".
std::string cpu_model_name();

}  // namespace nj
