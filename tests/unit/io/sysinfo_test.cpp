#include "engine/io/sysinfo.h"

#include <catch2/catch.hpp>

namespace nj {
namespace {

constexpr const char* kMeminfo =
    "MemTotal:       24567808 kB\n"
    "MemFree:        20000000 kB\n"
    "MemAvailable:   23000000 kB\n"
    "HugePages_Total:       0\n";

TEST_CASE("parse_proc_kb reads kB values and plain counts by exact key", "[util][sysinfo]") {
  CHECK(parse_proc_kb(kMeminfo, "MemTotal") == 24567808ull * 1024);
  CHECK(parse_proc_kb(kMeminfo, "HugePages_Total") == 0);
  CHECK_FALSE(parse_proc_kb(kMeminfo, "Mem").has_value());  // a prefix is not a key
  CHECK_FALSE(parse_proc_kb(kMeminfo, "SwapTotal").has_value());
  CHECK_FALSE(parse_proc_kb("VmHWM:  lots kB\n", "VmHWM").has_value());
  CHECK(parse_proc_kb("Name:\tnightjar\nVmHWM:\t  1234 kB\n", "VmHWM") == 1234ull * 1024);
}

TEST_CASE("parse_meminfo needs MemTotal and falls back to MemFree", "[util][sysinfo]") {
  auto info = parse_meminfo(kMeminfo);
  REQUIRE(info.ok());
  CHECK(info->available_bytes == 23000000ull * 1024);
  auto old = parse_meminfo("MemTotal: 100 kB\nMemFree: 40 kB\n");
  REQUIRE(old.ok());
  CHECK(old->available_bytes == 40 * 1024);
  CHECK_FALSE(parse_meminfo("MemFree: 40 kB\n").ok());
}

TEST_CASE("this machine's memory, disk and RSS are readable", "[util][sysinfo]") {
  auto mem = memory_info();
  REQUIRE(mem.ok());
  CHECK(mem->total_bytes > 0);
  CHECK(mem->available_bytes <= mem->total_bytes);
  auto disk = disk_space(".");
  REQUIRE(disk.ok());
  CHECK(disk->free_bytes <= disk->total_bytes);
  // The current RSS first: the peak read after it can only be as large (RSS may grow between
  // the two reads, and the operands of >= are evaluated in no fixed order).
  const uint64_t current = current_rss_bytes();
  CHECK(peak_rss_bytes() >= current);
  auto missing = disk_space("/nonexistent/nightjar-dir");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("/nonexistent/nightjar-dir") != std::string::npos);
}

}  // namespace
}  // namespace nj
