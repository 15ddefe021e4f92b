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
