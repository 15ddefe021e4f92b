// Re-execution with an OpenMP wait policy (see process.h).
#include "engine/util/process.h"

#include <unistd.h>

#include <cstdlib>

namespace nj {

void reexec_with_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure
}

}  // namespace nj

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace nj {
namespace {

// A fixed amount of floating-point work, split evenly over the team.
double timed_work(int threads) {
  constexpr long kIters = 2'000'000;
  double sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    const long per = kIters / omp_get_num_threads();
    double a = 1.0 + omp_get_thread_num(), b = 0.999999;
    for (long i = 0; i < per; ++i) a = a * b + 1e-9;
    sink += a;
  }
  volatile double keep = sink;  // the loop must not be optimized away
  (void)keep;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int calibrate_compute_threads() {
  const int cpus = omp_get_num_procs();
  if (cpus <= 1) return 1;
  std::vector<double> one, many;
  for (int r = 0; r < 3; ++r) {
    one.push_back(timed_work(1));
    many.push_back(timed_work(cpus));
  }
  std::sort(one.begin(), one.end());
  std::sort(many.begin(), many.end());
  return one[1] >= 1.6 * many[1] ? cpus : 1;
}

}  // namespace nj
