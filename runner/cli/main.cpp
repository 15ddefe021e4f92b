// The `nightjar` executable: everything lives in nightjar_runner.
#include "engine/util/process.h"
#include "runner/cli/cli.h"

int main(int argc, char** argv) {
  nj::reexec_with_passive_omp_wait(argv);
  return nj::runner::run_cli(argc, argv);
}
