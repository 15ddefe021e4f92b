// The POSIX Env and the durable-write recipe: replacement is atomic, and a failure or a
// crash at any step leaves the previous file (or, after the rename, the complete new one).
#include <catch2/catch.hpp>

#include "engine/io/durable.h"
#include "tests/unit/state/fault_env.h"
#include "tests/unit/state/state_test_util.h"

namespace nj::state_testing {
namespace {

std::string log_text(const FaultEnv& env) {
  std::string s;
  for (const auto& l : env.log()) s += l + "\n";
  return s;
}

// The operations a clean write_file_durably performs.
uint64_t clean_write_ops(const std::string& path) {
  FaultEnv env;
  REQUIRE(write_file_durably(env, path, "probe").ok());
  return env.ops();
}

TEST_CASE("write_file_durably replaces the file and leaves no temp file", "[io][durable]") {
  TempDir dir;
  const std::string p = dir.file("f");
  REQUIRE(write_file_durably(*Env::posix(), p, "one").ok());
  REQUIRE(write_file_durably(*Env::posix(), p, "second").ok());
  CHECK(read_bytes(p) == "second");
  CHECK(dir.names() == std::vector<std::string>{"f"});
}

TEST_CASE("write_file_durably: a failure at any step reports it and keeps the previous file",
          "[io][durable][fault]") {
  TempDir dir;
  const std::string p = dir.file("f");
  const uint64_t n = clean_write_ops(p);
  CHECK(n == 6);  // create, append, fdatasync, close, rename, fsync(dir)
  for (uint64_t i = 0; i < n; ++i) {
    write_bytes(p, "old");
    FaultEnv env;
    env.fail_op(i, StatusCode::kIOError);
    Status s = write_file_durably(env, p, "new contents");
    INFO("failing operation " << i << "\n" << log_text(env) << s.to_string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kIOError);
    CHECK(s.message().find(p) != std::string::npos);
    CHECK(s.message().find("injected") != std::string::npos);
    const bool renamed = env.log()[i].find("sync-dir") != std::string::npos;
    CHECK(read_bytes(p) == (renamed ? "new contents" : "old"));
    CHECK(dir.names() == std::vector<std::string>{"f"});  // no temp file left behind
  }
}

TEST_CASE("write_file_durably: a disk that fills up mid-write keeps the previous file",
          "[io][durable][fault]") {
  TempDir dir;
  const std::string p = dir.file("f");
  write_bytes(p, "old");
  FaultEnv env;
  env.fail_op(1, StatusCode::kResourceExhausted, 5);  // op 1 = the append
  Status s = write_file_durably(env, p, "new contents");
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK(s.message().find("(write)") != std::string::npos);
  CHECK(read_bytes(p) == "old");
  CHECK(dir.names() == std::vector<std::string>{"f"});
}

TEST_CASE(
    "write_file_durably: a crash at any step leaves the old or the new file, never a torn one",
    "[io][durable][crash]") {
  TempDir dir;
  const std::string p = dir.file("f");
  const uint64_t n = clean_write_ops(p);
  for (bool power_loss : {false, true}) {
    for (uint64_t i = 0; i <= n; ++i) {
      FaultEnv setup;
      REQUIRE(write_file_durably(setup, p, "old").ok());
      FaultEnv env;
      env.crash_at(i);
      Status s = write_file_durably(env, p, "new contents");
      CHECK(s.ok() == (i == n));
      if (power_loss) env.lose_unsynced();
      INFO("crash at operation " << i << (power_loss ? " with power loss" : "") << "\n"
                                 << log_text(env));
      const std::string got = read_bytes(p);
      CHECK((got == "old" || got == "new contents"));
      // Until the directory fsync returns, a power loss may undo the rename.
      if (power_loss && i < n) CHECK(got == "old");
    }
  }
}

TEST_CASE("Env::posix maps ENOSPC to ResourceExhausted", "[io][env]") {
  // /dev/full accepts open and refuses every write with ENOSPC.
  auto f = Env::posix()->new_appendable_file("/dev/full");
  REQUIRE(f.ok());
  Status s = (*f)->append("x");
  CHECK(s.code() == StatusCode::kResourceExhausted);
  CHECK(s.message().find("/dev/full") != std::string::npos);
}

TEST_CASE("Env::posix reports missing files as NotFound and lists directories", "[io][env]") {
  TempDir dir;
  Env& env = *Env::posix();
  CHECK(env.open_read(dir.file("nope")).status().code() == StatusCode::kNotFound);
  CHECK(env.new_appendable_file(dir.file("nope")).status().code() == StatusCode::kNotFound);
  CHECK(env.remove(dir.file("nope")).code() == StatusCode::kNotFound);
  REQUIRE(write_file_durably(env, dir.file("a"), "1").ok());
  auto app = env.new_appendable_file(dir.file("a"));
  REQUIRE(app.ok());
  const std::string_view more[] = {"2", "3"};
  REQUIRE(append_durably(**app, more).ok());
  CHECK(read_bytes(dir.file("a")) == "123");
  auto names = env.children(dir.path());
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"a"});
  CHECK(env.exists(dir.file("a")));
  CHECK(dir_name("x/y/z") == "x/y");
  CHECK(dir_name("z") == ".");
  CHECK(base_name("x/y/z") == "z");
}

TEST_CASE("append_durably reports a failed fdatasync", "[io][durable][fault]") {
  TempDir dir;
  REQUIRE(write_file_durably(*Env::posix(), dir.file("a"), "1").ok());
  FaultEnv env;
  env.fail_every(FsOp::kSync);
  auto app = env.new_appendable_file(dir.file("a"));
  REQUIRE(app.ok());
  const std::string_view more[] = {"2"};
  Status s = append_durably(**app, more);
  CHECK(s.code() == StatusCode::kIOError);
  CHECK(s.message().find("fdatasync") != std::string::npos);
}

}  // namespace
}  // namespace nj::state_testing
