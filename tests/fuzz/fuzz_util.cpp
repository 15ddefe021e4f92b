// Scratch files and findings for the fuzz targets (fuzz_util.h).
#include "tests/fuzz/fuzz_util.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace nj::fuzz {
namespace {

std::string make_scratch() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/nightjar-fuzz-XXXXXX";
  if (!::mkdtemp(tmpl.data())) fail("cannot make a scratch directory under " + tmpl);
  return tmpl;
}

struct Scratch {
  std::string path = make_scratch();
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

const std::string& scratch_dir() {
  static Scratch scratch;
  return scratch.path;
}

std::string write_scratch(const std::string& name, std::string_view contents) {
  const std::filesystem::path path = std::filesystem::path(scratch_dir()) / name;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) fail("cannot write " + path.string());
  return path.string();
}

std::string source_path(const std::string& rel) {
  return std::string(NJ_SOURCE_DIR) + "/" + rel;
}

std::string read_file_or_die(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void note(const std::string& outcome) {
  static const bool verbose = std::getenv("NJ_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "  %s\n", outcome.c_str());
}

void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace nj::fuzz
