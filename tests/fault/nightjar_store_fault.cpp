// `nightjar` with the fault-injecting SQLite VFS (fault_vfs.h) installed when NJ_FAULT_COUNTER
// is set: the program under test, unchanged, for tests/fault/test_store_faults.py.
#include "engine/util/process.h"
#include "runner/cli.h"
#include "tests/fault/fault_vfs.h"

int main(int argc, char** argv) {
  nj::reexec_with_passive_omp_wait(argv);  // before anything is counted: it may exec
  nj::testing::install_fault_vfs_from_env();
  return nj::runner::run_cli(argc, argv);
}
