// Machine facts from /proc and statvfs, and a memory-bandwidth probe.
#include "engine/io/sysinfo.h"

#include "engine/io/file.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/resource.h>
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

uint64_t free_memory_bytes() {
  auto info = memory_info();
  uint64_t free = info.ok() ? info->available_bytes : 0;
  struct rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const uint64_t mapped = proc_kb("/proc/self/status", "VmSize");
    const uint64_t left = as.rlim_cur > mapped ? as.rlim_cur - mapped : 0;
    free = free ? std::min(free, left) : left;
  }
  return free;
}

uint64_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM"); }
uint64_t current_rss_bytes() { return proc_kb("/proc/self/status", "VmRSS"); }

namespace {

// Sums n words as kStreams sequential streams with full-width vector loads: memory systems
// deliver more with several streams in flight (measured here: 8 streams per thread beat 1
// and 4), and the probe should show the most a kernel could get, never less.
constexpr int kStreams = 8;

__attribute__((target("avx2"))) uint64_t sum_streams_avx2(const uint64_t* p, size_t n) {
  const size_t q = n / kStreams / 4 * 4;
  __m256i a[kStreams];
  for (auto& v : a) v = _mm256_setzero_si256();
  for (size_t i = 0; i < q; i += 4)
    for (int s = 0; s < kStreams; ++s)
      a[s] = _mm256_add_epi64(a[s], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + static_cast<size_t>(s) * q + i)));
  __m256i t = a[0];
  for (int s = 1; s < kStreams; ++s) t = _mm256_add_epi64(t, a[s]);
  alignas(32) uint64_t v[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), t);
  uint64_t sum = v[0] + v[1] + v[2] + v[3];
  for (size_t i = kStreams * q; i < n; ++i) sum += p[i];
  return sum;
}

uint64_t sum_streams_sse2(const uint64_t* p, size_t n) {
  const size_t q = n / kStreams / 2 * 2;
  __m128i a[kStreams];
  for (auto& v : a) v = _mm_setzero_si128();
  for (size_t i = 0; i < q; i += 2)
    for (int s = 0; s < kStreams; ++s)
      a[s] = _mm_add_epi64(a[s], _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + static_cast<size_t>(s) * q + i)));
  __m128i t = a[0];
  for (int s = 1; s < kStreams; ++s) t = _mm_add_epi64(t, a[s]);
  alignas(16) uint64_t v[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(v), t);
  uint64_t sum = v[0] + v[1];
  for (size_t i = kStreams * q; i < n; ++i) sum += p[i];
  return sum;
}

}  // namespace

// The probe runs on the OpenMP team, the same threads the kernels use.
struct MemoryProbe::Impl {
  int threads;
  size_t words;
  AlignedBuffer storage;
  uint64_t sink = 0;

  uint64_t* buf() { return reinterpret_cast<uint64_t*>(storage.data()); }
  void run(bool write) {
    const bool wide = __builtin_cpu_supports("avx2");
    uint64_t* b = buf();
    uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const size_t n = static_cast<size_t>(omp_get_num_threads()), t = static_cast<size_t>(omp_get_thread_num());
      const size_t lo = words * t / n, hi = words * (t + 1) / n;
      if (write) {  // first touch from the reading thread commits the pages
        for (size_t i = lo; i < hi; ++i) b[i] = i;
      } else {
        total += wide ? sum_streams_avx2(b + lo, hi - lo) : sum_streams_sse2(b + lo, hi - lo);
      }
    }
    sink += total;
  }
};

MemoryProbe::MemoryProbe(uint64_t bytes, int threads)
    : impl_(new Impl{std::max(1, threads), static_cast<size_t>(bytes / 8), AlignedBuffer(bytes / 8 * 8)}) {
  impl_->run(true);
}

MemoryProbe::~MemoryProbe() { delete impl_; }

double MemoryProbe::measure_once() {
  auto t0 = std::chrono::steady_clock::now();
  impl_->run(false);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(impl_->words * 8) / secs / 1e9;
}

double measure_memory_read_gbps(uint64_t bytes, int threads, int repeats) {
  MemoryProbe probe(bytes, threads);
  std::vector<double> rates;
  for (int r = 0; r < std::max(1, repeats); ++r) rates.push_back(probe.measure_once());
  std::sort(rates.begin(), rates.end());
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
