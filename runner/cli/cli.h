// The command line: global options, logging set-up and the subcommand table.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace nj::runner {

// Options every subcommand sees.
struct GlobalOptions {
  int verbosity = 0;  // -v increments, -q decrements
};

// A subcommand registers its options on `app` and returns the function that runs it
// (called after parsing, returning the process exit code).
using CommandFn = std::function<int()>;

// Runs the program; returns the exit code.
int run_cli(int argc, char** argv);

}  // namespace nj::runner
