// Machine facts from /proc and statvfs, and a memory-bandwidth probe.
#include "engine/util/sysinfo.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace nj {
namespace {

std::string slurp(const char* file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t proc_kb(const char* file, const char* key) {
  return parse_proc_kb(slurp(file), key).value_or(0);
}

}  // namespace

std::optional<uint64_t> parse_proc_kb(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':')
      continue;
    std::string_view rest = line.substr(key.size() + 1);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    uint64_t v = 0;
    size_t i = 0;
    for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i) {
      if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + static_cast<uint64_t>(rest[i] - '0');
    }
    if (i == 0) return std::nullopt;
    std::string_view unit = rest.substr(i);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit.empty()) return v;  // a plain count
    if (unit.substr(0, 2) == "kB") return v * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

Result<MemoryInfo> parse_meminfo(std::string_view text) {
  MemoryInfo info;
  auto total = parse_proc_kb(text, "MemTotal");
  if (!total) return invalid_argument("meminfo: no MemTotal line");
  info.total_bytes = *total;
  // Kernels before 3.14 lack MemAvailable; MemFree is the conservative stand-in.
  info.available_bytes = parse_proc_kb(text, "MemAvailable")
                             .value_or(parse_proc_kb(text, "MemFree").value_or(0));
  return info;
}

Result<MemoryInfo> memory_info() {
  auto info = parse_meminfo(slurp("/proc/meminfo"));
  if (!info.ok()) return io_error("/proc/meminfo: cannot read MemTotal");
  return info;
}

Result<DiskSpace> disk_space(const std::string& dir) {
  struct statvfs vfs{};
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    if (errno == ENOENT) return not_found(dir + ": no such directory");
    return io_error(dir + ": statvfs failed: " + std::strerror(errno));
  }
  DiskSpace space;
  space.total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  space.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return space;
}

uint64_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM"); }
uint64_t current_rss_bytes() { return proc_kb("/proc/self/status", "VmRSS"); }

double measure_memory_read_gbps(uint64_t bytes, int threads, int repeats) {
  threads = std::max(1, threads);
  const size_t words = static_cast<size_t>(bytes / 8);
  std::vector<uint64_t> buf(words);
  // First touch from the thread that will read each part (NUMA-friendly, and it commits pages).
  auto part = [&](int t) {
    size_t lo = words * static_cast<size_t>(t) / static_cast<size_t>(threads);
    size_t hi = words * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
    return std::pair<size_t, size_t>(lo, hi);
  };
  std::vector<uint64_t> sink(static_cast<size_t>(threads) * 8);
  auto run = [&](bool write) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        auto [lo, hi] = part(t);
        if (write) {
          for (size_t i = lo; i < hi; ++i) buf[i] = i;
          return;
        }
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i = lo;
        for (; i + 4 <= hi; i += 4) {
          s0 += buf[i]; s1 += buf[i + 1]; s2 += buf[i + 2]; s3 += buf[i + 3];
        }
        for (; i < hi; ++i) s0 += buf[i];
        sink[static_cast<size_t>(t) * 8] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& th : pool) th.join();
  };
  run(true);
  std::vector<double> rates;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    run(false);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(static_cast<double>(words * 8) / secs / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  volatile uint64_t keep = sink[0];
  (void)keep;
  return rates[rates.size() / 2];
}

int cpu_count() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  }
  return "unknown";
}

}  // namespace nj
