// Which SIMD instruction set the kernels use: detected at run time, optionally forced
// lower (for tests and for reproducing another machine) with NIGHTJAR_SIMD or --simd.
#pragma once

#include <string_view>

#include "engine/util/status.h"

namespace nj {

enum class SimdLevel {
  kScalar = 0,  // portable C++; the reference every other path must match bit for bit
  kAvx2 = 1,    // AVX2 + FMA + F16C
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ
};

const char* simd_level_name(SimdLevel level);  // "scalar", "avx2", "avx512"

// Accepts "scalar", "avx2", "avx512" (case-insensitive). Returns InvalidArgument otherwise.
Result<SimdLevel> parse_simd_level(std::string_view name);

// The best level this CPU (and OS, for the register state) supports.
SimdLevel detect_simd_level();

// The level kernels use now: the detected one unless lowered by force_simd_level() or,
// at first use, by the NIGHTJAR_SIMD environment variable. Thread-safe to read.
SimdLevel active_simd_level();

// Forces the active level. Returns InvalidArgument when the CPU lacks `level`.
// Not thread-safe against kernels running concurrently: call before work starts.
Status force_simd_level(SimdLevel level);

}  // namespace nj
