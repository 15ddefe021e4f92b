// Lease owners: this process is alive; a finished child, another host and garbage are judged
// as documented.
#include "runner/durable/lease_owner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace nj::runner {
namespace {

TEST_CASE("this process's lease owner is alive, a reaped child's is not", "[runner][lease]") {
  const std::string me = this_lease_owner();
  CHECK(lease_owner_alive(me));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  // The child's name, built the way the child would have: our host, its pid, its start time.
  // Its start time is unknown once reaped, so any value: a reaped pid is dead either way.
  REQUIRE(waitpid(child, nullptr, 0) == child);
  const std::string host = me.substr(0, me.find('/'));
  CHECK_FALSE(lease_owner_alive(host + "/" + std::to_string(child) + "/12345"));
}

TEST_CASE("a recycled pid (same pid, another start time) is not the owner", "[runner][lease]") {
  const std::string me = this_lease_owner();
  const std::string prefix = me.substr(0, me.rfind('/') + 1);
  CHECK_FALSE(lease_owner_alive(prefix + "999999999999"));
}

TEST_CASE("owners on another host, or unparsable, count as alive (their leases expire)",
          "[runner][lease]") {
  CHECK(lease_owner_alive("some-other-host-nightjar/1/1"));
  CHECK(lease_owner_alive("garbage"));
  CHECK(lease_owner_alive(""));
}

}  // namespace
}  // namespace nj::runner
