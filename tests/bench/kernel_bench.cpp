// Matrix-vector kernel throughput as a fraction of memory bandwidth measured in the same run.
//   kernel_bench [--threads N] [--mb SIZE_MB] [--rounds N] [--cols N (default 7168, K3's hidden)]
// For each format and SIMD level, rounds alternate one memory-probe pass with one matvec
// over a matrix of the same size (both far larger than the caches); each round yields a
// ratio, and the median ratio is reported with the median rates and the ratios' range.
// Alternating cancels the drift of a shared host's memory bandwidth. Target (issue 3): BF16 and MXFP4 >= 60 % of
// the probe on 2 threads.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/io/file.h"
#include "engine/ops/kernels.h"
#include "engine/util/process.h"
#include "engine/util/sysinfo.h"
#include "tests/bench/bench_util.h"

using namespace nj;

namespace {

struct Matrix {
  ops::MatRef ref;
  AlignedBuffer data, scales;  // allocated as the engine holds weights
};

Matrix make_matrix(ops::MatFormat f, int cols, size_t bytes) {
  Matrix m;
  m.ref.format = f;
  m.ref.cols = cols;
  const size_t row_bytes = f == ops::MatFormat::kMxfp4 ? cols / 2 + cols / 32 : (f == ops::MatFormat::kF32 ? 4u : 2u) * cols;
  m.ref.rows = static_cast<int>(bytes / row_bytes);
  m.data = AlignedBuffer(m.ref.row_bytes() * static_cast<size_t>(m.ref.rows));
  uint64_t x = 88172645463325252ull;
  uint8_t* d = m.data.data();
  for (size_t i = 0; i < m.data.size(); ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    d[i] = static_cast<uint8_t>(x);
  }
  // Keep values finite: clear the top exponent bit of each element.
  if (f == ops::MatFormat::kBF16) for (size_t i = 1; i < m.data.size(); i += 2) d[i] &= 0xBF;
  if (f == ops::MatFormat::kF32) for (size_t i = 3; i < m.data.size(); i += 4) d[i] &= 0xBF;
  if (f == ops::MatFormat::kMxfp4) {
    m.scales = AlignedBuffer(static_cast<size_t>(m.ref.rows) * (cols / 32));
    for (size_t i = 0; i < m.scales.size(); ++i) m.scales.data()[i] = static_cast<uint8_t>(120 + i % 8);
    m.ref.scales = m.scales.data();
  }
  m.ref.data = m.data.data();
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  reexec_with_passive_omp_wait(argv);
  int threads = 2, rounds = 9, cols = 7168;
  size_t mb = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--mb")) mb = static_cast<size_t>(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--cols")) cols = std::atoi(argv[i + 1]);
  }
  omp_set_num_threads(threads);
  std::printf("kernel_bench: %d threads, %zu MB per matrix, %d alternating rounds (probe pass, matvec)\n\n",
              threads, mb, rounds);
  std::printf("%-6s %-7s %10s %11s %11s %9s %12s\n", "format", "simd", "ms/matvec", "kernel GB/s",
              "probe GB/s", "ratio", "ratio range");
  MemoryProbe probe(mb << 20, threads);
  for (ops::MatFormat f : {ops::MatFormat::kBF16, ops::MatFormat::kMxfp4, ops::MatFormat::kF32}) {
    Matrix m = make_matrix(f, cols, mb << 20);
    std::vector<float> xin(cols, 0.5f), y(static_cast<size_t>(m.ref.rows));
    for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAvx2, SimdLevel::kScalar}) {
      if (level > detect_simd_level() || !force_simd_level(level).ok()) continue;
      const int n = level == SimdLevel::kScalar ? 3 : rounds;
      ops::matvec(m.ref, xin.data(), y.data());  // warm-up
      std::vector<double> secs, probes, ratios;
      for (int r = 0; r < n; ++r) {
        const double p = probe.measure_once();
        const double t0 = bench::now_s();
        ops::matvec(m.ref, xin.data(), y.data());
        const double s = bench::now_s() - t0;
        const double k = static_cast<double>(m.ref.bytes()) / s / 1e9;
        secs.push_back(s);
        probes.push_back(p);
        ratios.push_back(k / p);
      }
      const double s = bench::median(secs);
      const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
      std::printf("%-6s %-7s %10.2f %11.2f %11.2f %8.0f%% %6.0f-%.0f%%\n", ops::mat_format_name(f),
                  simd_level_name(level), s * 1e3, static_cast<double>(m.ref.bytes()) / s / 1e9,
                  bench::median(probes), 100.0 * bench::median(ratios), 100.0 * *lo, 100.0 * *hi);
    }
    (void)force_simd_level(detect_simd_level());
  }
  return 0;
}
