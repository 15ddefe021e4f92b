// The SIMD levels this CPU runs (every kernel test compares them bit for bit), and a float's
// bits for those comparisons.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/ops/cpu.h"

namespace nj::testing {

inline std::vector<SimdLevel> levels() {
  std::vector<SimdLevel> out = {SimdLevel::kScalar};
  if (detect_simd_level() >= SimdLevel::kAvx2) out.push_back(SimdLevel::kAvx2);
  if (detect_simd_level() >= SimdLevel::kAvx512) out.push_back(SimdLevel::kAvx512);
  return out;
}

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace nj::testing
