// The `nightjar` executable: everything lives in nightjar_runner.
#include <malloc.h>

#include "engine/util/process.h"
#include "runner/cli/cli.h"

int main(int argc, char** argv) {
  nj::reexec_with_passive_omp_wait(argv);
  // Buffers of megabytes come and go all through a run (layer states, a sweep's window, a
  // shared prefix's copies), many on the items' threads. glibc raises its mmap threshold to
  // the largest block freed (up to 32 MiB), after which such buffers come from per-thread
  // heaps whose freed chunks stay resident: a K3 sweep at 8 GiB peaked at 1.13x its budget
  // that way, 1.02x with a fixed threshold (tests/bench/run_k3_sweep.sh). A fixed threshold
  // maps every block over 1 MiB and unmaps it when freed.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  return nj::runner::run_cli(argc, argv);
}
