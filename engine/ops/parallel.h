// Row-parallel loops for the work around the matrix products (norms, the short conv, the
// residual mixing, the MoE's gather and combine): with thousands of rows in a pass (a prefill,
// a layer sweep) these were serial sections in which the other threads waited.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace nj::ops {

// Work (in multiply-adds or elements touched) below which a loop stays on the calling thread:
// a fork/join costs tens of microseconds with passive waiting (the threshold of ops::matmul).
inline constexpr double kParallelMinWork = 524288.0;

// The threshold parallel_rows applies: kParallelMinWork, or what a test sets (0 splits every
// loop of more than one row, so that small test models run the threaded paths).
inline std::atomic<double> parallel_min_work{kParallelMinWork};

// Calls fn(first, last) on contiguous ranges that cover [0, n) exactly once, one range per
// OpenMP thread when n * work_per_row is worth waking the team and the caller is not already
// inside a parallel region, else fn(0, n) on the calling thread. Which thread handles a row
// never changes its result as long as fn treats rows independently (every caller's loops
// compute each row alone), so the bits are the same for any thread count.
template <class F>
void parallel_rows(int n, double work_per_row, F&& fn) {
  if (n <= 0) return;
  const int threads = std::min(omp_get_max_threads(), n);
  if (threads <= 1 || omp_in_parallel() || static_cast<double>(n) * work_per_row < parallel_min_work.load(std::memory_order_relaxed)) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int m = omp_get_num_threads(), id = omp_get_thread_num();
    const int first = static_cast<int>(static_cast<int64_t>(n) * id / m);
    const int last = static_cast<int>(static_cast<int64_t>(n) * (id + 1) / m);
    if (first < last) fn(first, last);
  }
}

}  // namespace nj::ops
