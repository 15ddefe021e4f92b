// The scalar kernel table: the portable reference every SIMD level must match bit for bit.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj::ops::scalar {
namespace {
#include "engine/ops/kernels_generic.inc"
}  // namespace

const KernelTable& table() {
  static const KernelTable t{SimdLevel::kScalar,
                             generic_matmul_rows,
                             generic_dot,
                             generic_matvec_t,
                             generic_kda_head,
                             generic_axpy,
                             situ_glu_lanes<ScalarLanes>,
                             sigmoid_lanes<ScalarLanes>,
                             sigmoid_gate_lanes<ScalarLanes>,
                             generic_short_conv};
  return t;
}

}  // namespace nj::ops::scalar
