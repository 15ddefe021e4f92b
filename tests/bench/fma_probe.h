// The FMA-throughput probe: how many floating-point operations per second this machine's
// threads reach at a SIMD level, doing nothing but fused multiply-adds on registers (12
// independent chains per thread: more than latency x issue width on current x86 cores, so the
// probe measures issue throughput). Benchmarks of compute-bound kernels report their rate as
// a fraction of this, measured in the same run and interleaved with their own rounds.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "engine/ops/cpu.h"
#include "tests/bench/bench_util.h"

namespace nj::bench {

// 12 chains of iters FMAs each on one thread; returns their sum (so no chain is dead code).
__attribute__((target("avx512f"))) inline float fma_chains_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, b);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"))) inline float fma_chains_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(static_cast<float>(i));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, b);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

class FmaProbe {
 public:
  // REQUIRES: level is kAvx2 or kAvx512 and the CPU supports it. Calibrates the pass length
  // to about pass_s seconds.
  FmaProbe(SimdLevel level, int threads, double pass_s = 0.05)
      : level_(level), threads_(std::max(1, threads)) {
    for (iters_ = 1 << 16;; iters_ *= 2) {
      const double t0 = now_s();
      run();
      if (now_s() - t0 >= pass_s / 4) break;
    }
    iters_ *= 4;
  }

  // One timed pass on all threads, in GFLOP/s (an FMA is two operations per lane).
  double measure_once() {
    const double t0 = now_s();
    run();
    const double s = now_s() - t0;
    const int lanes = level_ == SimdLevel::kAvx512 ? 16 : 8;
    return 2.0 * lanes * 12.0 * static_cast<double>(iters_) * threads_ / s / 1e9;
  }

  float sink() const { return sink_; }

 private:
  void run() {
    float total = 0.0f;
#pragma omp parallel num_threads(threads_) reduction(+ : total)
    total += level_ == SimdLevel::kAvx512 ? fma_chains_avx512(iters_) : fma_chains_avx2(iters_);
    sink_ += total;
  }

  SimdLevel level_;
  int threads_;
  int64_t iters_ = 0;
  float sink_ = 0.0f;
};

}  // namespace nj::bench
