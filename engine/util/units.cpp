// Byte-size and clock-time parsing (see units.h for the accepted forms).
#include "engine/util/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace nj {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Status bad_size(std::string_view text, const char* why) {
  return invalid_argument("invalid size '" + std::string(text) + "': " + why +
                          " (expected e.g. 8GiB, 512MiB, 1.5G or a number of bytes)");
}

}  // namespace

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return bad_size(text, "empty");
  size_t i = 0;
  uint64_t whole = 0;
  bool any_digit = false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (whole > (UINT64_MAX - d) / 10) return bad_size(text, "too large");
    whole = whole * 10 + d;
    any_digit = true;
    ++i;
  }
  // Fraction kept as an exact decimal: digits / 10^n.
  uint64_t frac = 0, frac_scale = 1;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (frac_scale < 1000000000000ULL) {
        frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
        frac_scale *= 10;
      }
      any_digit = true;
      ++i;
    }
  }
  if (!any_digit) return bad_size(text, "no number");
  while (i < s.size() && s[i] == ' ') ++i;
  std::string unit = lower(s.substr(i));
  uint64_t mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1ULL << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1ULL << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1ULL << 30;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1ULL << 40;
  else return bad_size(text, "unknown unit");
  if (mult == 1 && frac != 0) return bad_size(text, "a fraction of a byte");
  constexpr uint64_t kMax = 1ULL << 63;
  if (whole > kMax / mult) return bad_size(text, "too large");
  uint64_t bytes = whole * mult;
  // frac/frac_scale * mult, without overflow: mult is a power of two <= 2^40 and
  // frac < frac_scale <= 10^12, so split the multiply.
  long double extra = static_cast<long double>(frac) / static_cast<long double>(frac_scale) *
                      static_cast<long double>(mult);
  uint64_t extra_bytes = static_cast<uint64_t>(std::floor(extra));
  if (bytes > kMax - extra_bytes) return bad_size(text, "too large");
  return bytes + extra_bytes;
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

Result<ClockTime> parse_clock_time(std::string_view text) {
  std::string_view s = trim(text);
  auto bad = [&] {
    return invalid_argument("invalid time '" + std::string(text) +
                            "': expected HH:MM on a 24-hour clock, e.g. 07:00");
  };
  size_t colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2 || s.size() - colon != 3)
    return bad();
  int h = 0, m = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return bad();
    h = h * 10 + (s[i] - '0');
  }
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return bad();
    m = m * 10 + (s[i] - '0');
  }
  if (h > 23 || m > 59) return bad();
  return ClockTime{h, m};
}

std::time_t next_occurrence(ClockTime t, std::time_t now) {
  std::tm local{};
  localtime_r(&now, &local);
  for (int day = 0; day < 3; ++day) {
    std::tm cand = local;
    cand.tm_mday += day;
    cand.tm_hour = t.hour;
    cand.tm_min = t.minute;
    cand.tm_sec = 0;
    cand.tm_isdst = -1;
    std::time_t when = std::mktime(&cand);
    if (when > now) return when;
  }
  return now + 24 * 3600;  // unreachable in practice: one of the next days matches
}

}  // namespace nj
