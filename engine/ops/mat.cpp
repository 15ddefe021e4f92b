// MatRef geometry and the E8M0 table.
#include "engine/ops/mat.h"

#include <cstring>

#include "engine/util/status.h"

namespace nj::ops {

const char* mat_format_name(MatFormat f) {
  switch (f) {
    case MatFormat::kF32: return "F32";
    case MatFormat::kBF16: return "BF16";
    case MatFormat::kF16: return "F16";
    case MatFormat::kMxfp4: return "MXFP4";
  }
  return "?";
}

size_t MatRef::bytes() const {
  size_t b = row_bytes() * static_cast<size_t>(rows);
  if (format == MatFormat::kMxfp4) b += static_cast<size_t>(rows) * static_cast<size_t>(cols / 32);
  return b;
}

MatRef MatRef::row_slice(int r0, int n) const {
  NJ_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows);
  MatRef m = *this;
  m.rows = n;
  m.data = static_cast<const uint8_t*>(data) + row_bytes() * static_cast<size_t>(r0);
  if (format == MatFormat::kMxfp4) m.scales = scales + static_cast<size_t>(r0) * static_cast<size_t>(cols / 32);
  return m;
}

}  // namespace nj::ops
