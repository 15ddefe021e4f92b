// Run-time SIMD detection and the process-wide active level.
#include "engine/ops/cpu.h"

#include <cpuid.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

namespace nj {
namespace {

std::atomic<int> g_active{-1};

// CPUID.1:ECX.F16C. Clang's __builtin_cpu_supports does not know "f16c" (GCC's does); the
// AVX check beside it already covers the OS's register state.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

SimdLevel initial_level() {
  SimdLevel best = detect_simd_level();
  if (const char* env = std::getenv("NIGHTJAR_SIMD"); env && *env) {
    auto forced = parse_simd_level(env);
    if (forced.ok() && *forced <= best) return *forced;
    std::fprintf(stderr, "nightjar: ignoring NIGHTJAR_SIMD=%s (this CPU supports up to %s)\n", env,
                 simd_level_name(best));
  }
  return best;
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

Result<SimdLevel> parse_simd_level(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "scalar") return SimdLevel::kScalar;
  if (n == "avx2") return SimdLevel::kAvx2;
  if (n == "avx512" || n == "avx-512") return SimdLevel::kAvx512;
  return invalid_argument("unknown SIMD level '" + std::string(name) +
                          "' (expected scalar, avx2 or avx512)");
}

SimdLevel detect_simd_level() {
  __builtin_cpu_init();
  // libgcc's checks include the OS's XSAVE state for the AVX and AVX-512 registers.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return SimdLevel::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    return SimdLevel::kAvx2;
  return SimdLevel::kScalar;
}

SimdLevel active_simd_level() {
  int v = g_active.load(std::memory_order_acquire);
  if (v < 0) {
    int want = static_cast<int>(initial_level());
    int expected = -1;
    g_active.compare_exchange_strong(expected, want, std::memory_order_acq_rel);
    v = g_active.load(std::memory_order_acquire);
  }
  return static_cast<SimdLevel>(v);
}

Status force_simd_level(SimdLevel level) {
  SimdLevel best = detect_simd_level();
  if (level > best)
    return invalid_argument(std::string("SIMD level ") + simd_level_name(level) +
                            " is not supported by this CPU (best: " + simd_level_name(best) + ")");
  g_active.store(static_cast<int>(level), std::memory_order_release);
  return Status();
}

}  // namespace nj
