// Human units shared by every layer: byte sizes ("8GiB", "512MiB", "1.5G", "4096") and
// wall-clock times of day ("07:00") used for deadlines.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

#include "engine/util/status.h"

namespace nj {

// Parses a byte size. Accepted: a plain non-negative integer (bytes); or a number (integer
// or decimal) followed by a unit: B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (case-
// insensitive, optional space). Units are binary (1K = 1KiB = 1024) because budgets
// are compared with RAM, which is sold and reported in binary units. Fractional results
// round down to a whole byte.
// Returns InvalidArgument naming the text for anything else (empty, negative, unknown
// unit, overflow past 2^63).
Result<uint64_t> parse_bytes(std::string_view text);

// "1.50 GiB", "512.00 MiB", "4096 B": for messages and reports.
std::string format_bytes(uint64_t bytes);

// A time of day, minutes since midnight.
struct ClockTime {
  int hour = 0;    // 0..23
  int minute = 0;  // 0..59
};

// Parses "HH:MM" (24-hour, one or two digit hour, two digit minutes), e.g. "07:00", "7:00",
// "23:59". Returns InvalidArgument naming the text otherwise.
Result<ClockTime> parse_clock_time(std::string_view text);

// The first local instant strictly after `now` whose wall clock reads `t` (today if still
// ahead, otherwise tomorrow). Uses the process's time zone; handles DST via mktime.
std::time_t next_occurrence(ClockTime t, std::time_t now);

}  // namespace nj
