// The `nightjar` program's exit codes (also listed in --help and the README).
#pragma once

#include "engine/util/status.h"

namespace nj::runner {

enum ExitCode : int {
  kExitOk = 0,           // done (including a graceful stop on SIGTERM or a deadline)
  kExitFailure = 1,      // the work failed: I/O error, disk full, engine or store failure
  kExitUsage = 2,        // the command line is wrong: unknown flag, missing or bad value
  kExitBadInput = 3,     // an input is invalid or missing: model, spec, checkpoint, job id
  kExitItemsFailed = 4,  // `run` ended as asked, but items failed for good during it
};

inline constexpr const char* kExitCodeHelp =
    "Exit codes:\n"
    "  0  success (a graceful stop on SIGTERM/SIGINT or --until also exits 0)\n"
    "  1  the work failed: I/O error, full disk, engine or store failure\n"
    "  2  usage error: unknown option, missing or malformed value\n"
    "  3  invalid input: a model, spec, checkpoint, directory or job that is missing or\n"
    "     fails validation (the message names the file, key or line)\n"
    "  4  `run` ended as asked (queue empty, deadline, signal, --max-items), but items\n"
    "     failed for good during it (status and results give their errors)\n"
    "  128+N  `run` ended at once by a second SIGTERM/SIGINT (N); safe, the next run resumes\n";

// Maps a failed Status to an exit code.
inline int exit_code_for(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kCorruption:
    case StatusCode::kFailedPrecondition: return kExitBadInput;
    default: return kExitFailure;
  }
}

}  // namespace nj::runner
