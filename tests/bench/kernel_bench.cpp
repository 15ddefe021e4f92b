// Matrix-product kernels against probes of the machine measured in the same run.
//   kernel_bench [--threads N] [--rounds N] [--only matvec|tokens]
//                [--mb SIZE_MB] [--cols N (default 7168, K3's hidden)]
//                [--rows N (default 4096)] [--tokens T,T,... (default 1,8,64,512)]
//                [--formats bf16,mxfp4,f32 (default all three)]
// Two tables, each with the thread count in its heading:
//  * matvec: one token row against a matrix of --mb MB (far larger than the caches), as a
//    fraction of the memory bandwidth probe (issue 3's target: BF16 and MXFP4 >= 60 % of the
//    probe on 2 threads);
//  * tokens: T token rows against a [rows][cols] matrix, in GFLOP/s (2·rows·cols·T per product,
//    the useful operations; MXFP4's canonical order also spends one add and one multiply-add
//    per 8 products, not counted) as a fraction of the FMA-throughput probe at the same SIMD
//    level (issue 13's target: at T >= 64, BF16 and MXFP4 >= 50 % of the AVX-512 probe).
// For each format, SIMD level (and T), rounds alternate one probe pass with one product; each
// round yields a ratio, and the table gives the median time, the median rates, the median
// ratio and the ratios' range. Alternating cancels the drift of a shared host. The tokens table
// also gives the median ratio of operations per CPU-second of the process (product against
// probe): on a host whose other processes take CPU time from the run, wall-clock ratios
// scatter with the scheduling; the CPU-time ratio says what the threads did while they ran
// (it does not see time lost to load imbalance between the threads).
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/io/file.h"
#include "engine/ops/kernels.h"
#include "engine/util/process.h"
#include "engine/io/sysinfo.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/fma_probe.h"

using namespace nj;

namespace {

std::vector<ops::MatFormat> g_formats = {ops::MatFormat::kBF16, ops::MatFormat::kMxfp4,
                                         ops::MatFormat::kF32};

struct Matrix {
  ops::MatRef ref;
  AlignedBuffer data, scales;  // allocated as the engine holds weights
};

// Random finite weights: `rows` rows, or as many as fit `bytes` when rows == 0.
Matrix make_matrix(ops::MatFormat f, int cols, int rows, size_t bytes) {
  Matrix m;
  m.ref.format = f;
  m.ref.cols = cols;
  const size_t row_bytes = f == ops::MatFormat::kMxfp4
                               ? cols / 2 + cols / 32
                               : (f == ops::MatFormat::kF32 ? 4u : 2u) * cols;
  m.ref.rows = rows > 0 ? rows : static_cast<int>(bytes / row_bytes);
  m.data = AlignedBuffer(m.ref.row_bytes() * static_cast<size_t>(m.ref.rows));
  uint64_t x = 88172645463325252ull;
  uint8_t* d = m.data.data();
  for (size_t i = 0; i < m.data.size(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d[i] = static_cast<uint8_t>(x);
  }
  // Keep values finite: clear the top exponent bit of each element.
  if (f == ops::MatFormat::kBF16)
    for (size_t i = 1; i < m.data.size(); i += 2) d[i] &= 0xBF;
  if (f == ops::MatFormat::kF32)
    for (size_t i = 3; i < m.data.size(); i += 4) d[i] &= 0xBF;
  if (f == ops::MatFormat::kMxfp4) {
    m.scales = AlignedBuffer(static_cast<size_t>(m.ref.rows) * (cols / 32));
    for (size_t i = 0; i < m.scales.size(); ++i)
      m.scales.data()[i] = static_cast<uint8_t>(120 + i % 8);
    m.ref.scales = m.scales.data();
  }
  m.ref.data = m.data.data();
  return m;
}

struct Rounds {
  std::vector<double> secs, probes, ratios, cpu_ratios;
  void add(double s, double probe, double rate) {
    secs.push_back(s);
    probes.push_back(probe);
    ratios.push_back(rate / probe);
  }
  // "median ratio, range" columns.
  void print_ratio() const {
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    std::printf(" %8.0f%% %6.0f-%.0f%%", 100.0 * bench::median(ratios), 100.0 * *lo, 100.0 * *hi);
    if (!cpu_ratios.empty()) std::printf(" %10.0f%%", 100.0 * bench::median(cpu_ratios));
    std::printf("\n");
  }
};

std::vector<SimdLevel> simd_levels(bool with_scalar) {
  std::vector<SimdLevel> out;
  for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAvx2, SimdLevel::kScalar})
    if (level <= detect_simd_level() && (with_scalar || level != SimdLevel::kScalar))
      out.push_back(level);
  return out;
}

// One token row against --mb MB of weights, as a fraction of the memory probe.
void matvec_table(int threads, int rounds, size_t mb, int cols) {
  std::printf(
      "matvec: %d threads, %zu MB per matrix, %d alternating rounds (memory probe pass, "
      "matvec)\n\n",
      threads, mb, rounds);
  std::printf("%-6s %-7s %10s %11s %11s %9s %12s\n", "format", "simd", "ms/matvec", "kernel GB/s",
              "probe GB/s", "ratio", "ratio range");
  MemoryProbe probe(mb << 20, threads);
  for (ops::MatFormat f : g_formats) {
    Matrix m = make_matrix(f, cols, 0, mb << 20);
    std::vector<float> xin(cols, 0.5f), y(static_cast<size_t>(m.ref.rows));
    for (SimdLevel level : simd_levels(true)) {
      if (!force_simd_level(level).ok()) continue;
      const int n = level == SimdLevel::kScalar ? 3 : rounds;
      ops::matvec(m.ref, xin.data(), y.data());  // warm-up
      Rounds r;
      for (int i = 0; i < n; ++i) {
        const double p = probe.measure_once();
        const double t0 = bench::now_s();
        ops::matvec(m.ref, xin.data(), y.data());
        const double s = bench::now_s() - t0;
        r.add(s, p, static_cast<double>(m.ref.bytes()) / s / 1e9);
      }
      const double s = bench::median(r.secs);
      std::printf("%-6s %-7s %10.2f %11.2f %11.2f", ops::mat_format_name(f), simd_level_name(level),
                  s * 1e3, static_cast<double>(m.ref.bytes()) / s / 1e9, bench::median(r.probes));
      r.print_ratio();
    }
  }
  (void)force_simd_level(detect_simd_level());
}

// T token rows against a [rows][cols] matrix, as a fraction of the FMA probe.
void tokens_table(int threads, int rounds, int rows, int cols, const std::vector<int>& tokens) {
  std::printf(
      "\ntokens: %d threads, [%d][%d] matrix, %d alternating rounds (FMA probe pass, matmul)\n\n",
      threads, rows, cols, rounds);
  std::printf("%-6s %-7s %5s %10s %8s %11s %11s %9s %12s %11s\n", "format", "simd", "T",
              "ms/matmul", "MB", "GFLOP/s", "probe", "ratio", "ratio range", "cpu ratio");
  const int max_t = *std::max_element(tokens.begin(), tokens.end());
  std::vector<float> X(static_cast<size_t>(max_t) * static_cast<size_t>(cols));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (float& v : X) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    v = static_cast<float>(s >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
  std::vector<float> Y(static_cast<size_t>(max_t) * static_cast<size_t>(rows));
  for (ops::MatFormat f : g_formats) {
    Matrix m = make_matrix(f, cols, rows, 0);
    for (SimdLevel level : simd_levels(false)) {
      if (!force_simd_level(level).ok()) continue;
      bench::FmaProbe probe(level, threads);
      for (int T : tokens) {
        auto product = [&] { ops::matmul(m.ref, X.data(), T, cols, Y.data(), rows); };
        product();  // warm-up
        const double flops = 2.0 * rows * static_cast<double>(cols) * T;
        Rounds r;
        for (int i = 0; i < rounds; ++i) {
          const double pc0 = bench::cpu_s(), pw0 = bench::now_s();
          const double p = probe.measure_once();
          const double probe_cpu = bench::cpu_s() - pc0, probe_wall = bench::now_s() - pw0;
          const double c0 = bench::cpu_s(), t0 = bench::now_s();
          product();
          const double sec = bench::now_s() - t0, cpu = bench::cpu_s() - c0;
          r.add(sec, p, flops / sec / 1e9);
          // Operations per CPU-second against the probe's: what the threads did while they ran.
          r.cpu_ratios.push_back((flops / cpu) / (p * 1e9 * probe_wall / probe_cpu));
        }
        const double sec = bench::median(r.secs);
        std::printf("%-6s %-7s %5d %10.2f %8.1f %11.1f %11.1f", ops::mat_format_name(f),
                    simd_level_name(level), T, sec * 1e3, static_cast<double>(m.ref.bytes()) / 1e6,
                    flops / sec / 1e9, bench::median(r.probes));
        r.print_ratio();
      }
    }
  }
  (void)force_simd_level(detect_simd_level());
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  int threads = 2, rounds = 9, cols = 7168, rows = 4096;
  size_t mb = 256;
  std::string only;
  std::vector<int> tokens = {1, 8, 64, 512};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mb"))
      mb = static_cast<size_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--cols"))
      cols = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows"))
      rows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--tokens"))
      tokens = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--formats")) {
      g_formats.clear();
      for (ops::MatFormat f :
           {ops::MatFormat::kBF16, ops::MatFormat::kMxfp4, ops::MatFormat::kF32}) {
        std::string name = ops::mat_format_name(f);
        for (char& ch : name) ch = static_cast<char>(std::tolower(ch));
        if (std::strstr(argv[i + 1], name.c_str())) g_formats.push_back(f);
      }
    } else {
      std::fprintf(stderr, "kernel_bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (g_formats.empty() || tokens.empty() || *std::min_element(tokens.begin(), tokens.end()) < 1 ||
      (!only.empty() && only != "matvec" && only != "tokens")) {
    std::fprintf(stderr,
                 "kernel_bench: --tokens takes counts >= 1, --only matvec or tokens, --formats "
                 "some of bf16,mxfp4,f32\n");
    return 2;
  }
  omp_set_num_threads(threads);
  if (only.empty() || only == "matvec") matvec_table(threads, rounds, mb, cols);
  if (only.empty() || only == "tokens") tokens_table(threads, rounds, rows, cols, tokens);
  return 0;
}
