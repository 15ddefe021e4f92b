// Element types of checkpoint tensors and exact conversions to float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace nj {

enum class DType : uint8_t {
  kF32, kBF16, kF16, kU8,
  // Indexed (sizes known, offsets checked) but never computed with:
  kF64, kI64, kI32, kI16, kI8, kU16, kU32, kU64, kBool, kF8E4M3, kF8E5M2,
};

// Safetensors spelling ("F32", "BF16", ...). Returns false for an unknown name.
bool parse_dtype(std::string_view name, DType* out);
const char* dtype_name(DType d);
size_t dtype_size(DType d);

// Exact widenings (every BF16 and F16 value is representable in F32).
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3FF) << 13;
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round-to-nearest-even narrowing, for tests and generators.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// Converts n elements of a float-like dtype (F32, BF16, F16) to F32. `src` may be unaligned.
// REQUIRES: d is kF32, kBF16 or kF16.
void widen_to_f32(DType d, const void* src, size_t n, float* dst);

}  // namespace nj
