// What the fuzz targets share: a scratch directory per process for the parsers that read
// files, and the way a target reports a broken contract (a finding).
//
// A target's LLVMFuzzerTestOneInput must not crash, leak or trip a sanitizer on any input,
// and where the parser promises more (an error names the file, an accepted index only holds
// extents inside its file) the target checks that too and calls fail() when it does not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nj::fuzz {

// The input as bytes.
inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// This process's scratch directory (under $TMPDIR, else /tmp), made on first use and removed
// with everything in it when the process exits normally. Aborts when it cannot be made.
const std::string& scratch_dir();

// Writes `contents` to scratch_dir()/name, replacing it, and returns the path. `name` may
// hold directories below the scratch directory (made as needed). Aborts on failure: the
// fuzzer's environment is broken, not the parser under test.
std::string write_scratch(const std::string& name, std::string_view contents);

// PROJECT_SOURCE_DIR/rel: fixtures the targets build their fixed files from.
std::string source_path(const std::string& rel);

// Reads a whole file; aborts when it cannot (a missing fixture).
std::string read_file_or_die(const std::string& path);

// With NJ_FUZZ_VERBOSE set, prints what the parser made of an input ("accepted", or its
// error): to see how deep the seeds reach. Silent otherwise (fuzzing speed).
void note(const std::string& outcome);

// A finding: prints `what` to stderr and aborts (libFuzzer saves the input as a crash).
[[noreturn]] void fail(const std::string& what);

// fail(what) unless `ok`.
inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

}  // namespace nj::fuzz
