// The runner's clock for timing work: steady (it never jumps with the wall clock), in
// seconds as double, the unit every *_s field of the store and the logs uses.
#pragma once

#include <chrono>

namespace nj::runner {

using Clock = std::chrono::steady_clock;

// Seconds from `t` to now.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace nj::runner
