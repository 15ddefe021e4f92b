// A SQLite VFS that fails one chosen write or sync, for the store's fault-injection test
// (SQLite's own discipline: fail the Nth I/O, then check that nothing was lost).
//
// It wraps the platform's default VFS and becomes the default itself, so that the job store
// (runner/store/sqlite.cpp opens with the default VFS) goes through it unchanged. It counts
// every xWrite and xSync on every file SQLite opens (the database, its WAL and any journal;
// the WAL index is shared memory, not written through xWrite) and fails exactly one of them:
//
//   operation N (1-based, counted across processes, see below) returns `code` without
//   touching the file; every other operation is passed through.
//
// The count spans a whole scripted night of separate `nightjar` processes: it starts from the
// number stored in the counter file and is stored back when the process exits, with whether
// the fault fired. Counter file := "<operations so far> <1 if the fault has fired, else 0>\n".
#pragma once

#include <cstdint>
#include <string>

namespace nj::testing {

struct FaultPlan {
  std::string counter_file;  // carries the count from process to process
  uint64_t fail_at = 0;      // 1-based operation to fail; 0 = only count
  int code = 0;              // SQLite result code it fails with (SQLITE_FULL, SQLITE_IOERR_*)
};

// Reads the plan from the environment:
//   NJ_FAULT_COUNTER=FILE         required to install anything
//   NJ_FAULT_AT=N                 the operation to fail (absent or 0: count only)
//   NJ_FAULT_CODE=full|ioerr      SQLITE_FULL, or SQLITE_IOERR_WRITE / SQLITE_IOERR_FSYNC by
//                                 the operation (default full)
// and installs the VFS as the default. Returns false (installing nothing) without
// NJ_FAULT_COUNTER; aborts on a malformed plan or a SQLite error (a broken test setup).
bool install_fault_vfs_from_env();

}  // namespace nj::testing
