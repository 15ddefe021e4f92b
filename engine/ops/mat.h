// How kernels see a weight matrix: row-major [rows][cols] in its stored format, y = W x.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/util/dtype.h"

namespace nj::ops {

enum class MatFormat : uint8_t {
  kF32,
  kBF16,
  kF16,
  kMxfp4,  // E2M1 nibbles [rows][cols/2] (low nibble = even column) + E8M0 scales [rows][cols/32]
};

const char* mat_format_name(MatFormat f);

struct MatRef {
  MatFormat format = MatFormat::kF32;
  int rows = 0;
  int cols = 0;
  const void* data = nullptr;       // elements, or MXFP4 packed nibbles; may be unaligned
  const uint8_t* scales = nullptr;  // MXFP4 only

  // Bytes per row of `data` (and of `scales` for MXFP4: cols / 32). Inline: the kernels ask
  // for it per block of rows (out of line it held 0.6 % of a resident B = 64 step's samples).
  size_t row_bytes() const {
    switch (format) {
      case MatFormat::kF32: return static_cast<size_t>(cols) * 4;
      case MatFormat::kBF16:
      case MatFormat::kF16: return static_cast<size_t>(cols) * 2;
      case MatFormat::kMxfp4: return static_cast<size_t>(cols) / 2;
    }
    return 0;
  }
  // Total bytes of data plus scales.
  size_t bytes() const;
  // Rows [r0, r0 + n) as a matrix of their own.
  MatRef row_slice(int r0, int n) const;
};

// E2M1 code → value; bit 3 is the sign (code 8 is −0).
inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// E8M0 scale code s → 2^(s−127) as a float (s = 0 gives the subnormal 2^−127). Code 255 is
// NaN in the format and means "this block contributes 0"; kernels skip such blocks.
inline float e8m0_scale(uint8_t s) {
  const uint32_t bits = s == 0 ? 0x00400000u : static_cast<uint32_t>(s) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline constexpr uint8_t kE8M0Zero = 255;

}  // namespace nj::ops
