#include "engine/util/units.h"

#include <catch2/catch.hpp>

namespace nj {
namespace {

TEST_CASE("parse_bytes accepts binary units, decimals and plain bytes", "[util][units]") {
  CHECK(*parse_bytes("8GiB") == 8ull << 30);
  CHECK(*parse_bytes("512MiB") == 512ull << 20);
  CHECK(*parse_bytes("1.5G") == 3ull << 29);
  CHECK(*parse_bytes("4096") == 4096);
  CHECK(*parse_bytes("0") == 0);
  CHECK(*parse_bytes("1k") == 1024);
  CHECK(*parse_bytes("2 TB") == 2ull << 40);
  CHECK(*parse_bytes(" 64mb ") == 64ull << 20);
  CHECK(*parse_bytes("0.5KiB") == 512);
  CHECK(*parse_bytes("1.0001K") == 1024);  // fractions round down to whole bytes
  CHECK(*parse_bytes("12B") == 12);
}

TEST_CASE("parse_bytes rejects bad input and names the text", "[util][units]") {
  for (const char* bad : {"", "GiB", "-1", "8XB", "1.5", "1.2.3G", "eight", "9999999999T",
                          "18446744073709551616", "1e9"}) {
    auto r = parse_bytes(bad);
    INFO("input: '" << bad << "'");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("format_bytes picks a readable unit", "[util][units]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(8ull << 30) == "8.00 GiB");
}

TEST_CASE("parse_clock_time accepts HH:MM and rejects the rest", "[util][units]") {
  auto t = parse_clock_time("07:00");
  REQUIRE(t.ok());
  CHECK(t->hour == 7);
  CHECK(t->minute == 0);
  CHECK(parse_clock_time("7:05")->minute == 5);
  CHECK(parse_clock_time("23:59")->hour == 23);
  for (const char* bad : {"24:00", "12:60", "7", "07:0", "ab:cd", "", "007:00", "07:00pm"}) {
    auto r = parse_clock_time(bad);
    INFO("input: '" << bad << "'");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("next_occurrence is later today or else tomorrow", "[util][units]") {
  setenv("TZ", "UTC", 1);
  tzset();
  // 2026-11-30 05:30:00 UTC
  const std::time_t now = 1796016600;
  std::time_t seven = next_occurrence({7, 0}, now);
  CHECK(seven - now == 90 * 60);
  std::time_t four = next_occurrence({4, 0}, now);
  CHECK(four - now == (22 * 60 + 30) * 60);
  // Exactly now is not "after now": the deadline is a day away.
  CHECK(next_occurrence({5, 30}, now) - now == 24 * 3600);
}

}  // namespace
}  // namespace nj
