// The `nightjar` executable: everything lives in nightjar_runner.
#include "runner/cli.h"

int main(int argc, char** argv) { return nj::runner::run_cli(argc, argv); }
