// DType names, sizes and widening.
#include "engine/util/dtype.h"

#include "engine/util/status.h"

namespace nj {
namespace {
struct DTypeInfo {
  DType d;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::kF32, "F32", 4},   {DType::kBF16, "BF16", 2}, {DType::kF16, "F16", 2},
    {DType::kU8, "U8", 1},     {DType::kF64, "F64", 8},   {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},   {DType::kI16, "I16", 2},   {DType::kI8, "I8", 1},
    {DType::kU16, "U16", 2},   {DType::kU32, "U32", 4},   {DType::kU64, "U64", 8},
    {DType::kBool, "BOOL", 1}, {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
};
}  // namespace

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& i : kInfo) {
    if (name == i.name) {
      *out = i.d;
      return true;
    }
  }
  return false;
}

const char* dtype_name(DType d) { return kInfo[static_cast<size_t>(d)].name; }
size_t dtype_size(DType d) { return kInfo[static_cast<size_t>(d)].size; }

void widen_to_f32(DType d, const void* src, size_t n, float* dst) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (d) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    default:
      NJ_CHECK_MSG(false, "widen_to_f32: not a float dtype");
  }
}

}  // namespace nj
