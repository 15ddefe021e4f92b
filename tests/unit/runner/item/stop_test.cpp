// StopControl: the --until deadline (signals are exercised end to end in tests/cli).
#include "runner/item/stop.h"

#include <catch2/catch.hpp>

namespace nj::runner {
namespace {

TEST_CASE("a passed deadline asks for a stop and names it, a future one does not",
          "[runner][stop]") {
  const std::time_t now = std::time(nullptr);
  CHECK(StopControl(now - 1, "07:00").reason() == std::optional<std::string>("deadline 07:00"));
  CHECK_FALSE(StopControl(now + 3600, "08:00").reason());
  CHECK_FALSE(StopControl().reason());
}

}  // namespace
}  // namespace nj::runner
