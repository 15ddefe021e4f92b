// Random weight matrices in every format with their exact values, random activations, and
// activations arranged as the row kernels read them: shared by the kernel tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/ops/kernels.h"
#include "engine/util/dtype.h"

namespace nj::testing {

using ops::MatFormat;
using ops::MatRef;

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  float uniform() {
    return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
};

// A random matrix in `format` plus its exact values as doubles.
struct TestMatrix {
  MatRef ref;
  std::vector<uint8_t> data, scales;
  std::vector<double> exact;  // [rows][cols]
};

inline TestMatrix make_matrix(MatFormat f, int rows, int cols, Rng& rng) {
  TestMatrix m;
  m.ref.format = f;
  m.ref.rows = rows;
  m.ref.cols = cols;
  m.exact.resize(static_cast<size_t>(rows) * cols);
  m.data.resize(m.ref.row_bytes() * static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      float v = rng.uniform();
      if (f == MatFormat::kF32) {
        std::memcpy(&m.data[4 * i], &v, 4);
        m.exact[i] = v;
      } else if (f == MatFormat::kBF16) {
        uint16_t h = f32_to_bf16(v);
        std::memcpy(&m.data[2 * i], &h, 2);
        m.exact[i] = bf16_to_f32(h);
      } else if (f == MatFormat::kF16) {
        // Random F16 bit patterns in the normal range (exponent 1..29), incl. some subnormals.
        uint16_t h = static_cast<uint16_t>((rng.next() & 0x83FF) | ((rng.next() % 30) << 10));
        std::memcpy(&m.data[2 * i], &h, 2);
        m.exact[i] = f16_to_f32(h);
      }
    }
  }
  if (f == MatFormat::kMxfp4) {
    const int nb = cols / 32;
    m.scales.resize(static_cast<size_t>(rows) * nb);
    for (auto& b : m.data) b = static_cast<uint8_t>(rng.next());
    for (auto& s : m.scales) {
      uint64_t r = rng.next() % 16;
      s = r == 0 ? ops::kE8M0Zero : static_cast<uint8_t>(120 + r);  // some "zero" blocks
    }
    m.scales[0] = 0;  // the subnormal 2^-127 scale
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        uint8_t byte = m.data[static_cast<size_t>(r) * (cols / 2) + c / 2];
        uint8_t code = c % 2 ? byte >> 4 : byte & 15;
        uint8_t s = m.scales[static_cast<size_t>(r) * nb + c / 32];
        m.exact[static_cast<size_t>(r) * cols + c] =
            s == ops::kE8M0Zero ? 0.0
                                : static_cast<double>(ops::kE2M1[code]) * std::ldexp(1.0, s - 127);
      }
    m.ref.scales = m.scales.data();
  }
  m.ref.data = m.data.data();
  return m;
}

inline std::vector<float> random_vec(size_t n, Rng& rng) {
  std::vector<float> v(n);
  for (auto& x : v) x = rng.uniform();
  return v;
}

// Arranges T token rows of X ([T][xs], cols used) as the rows of format f read them, into
// [T][cols].
inline std::vector<float> arranged(MatFormat f, const std::vector<float>& X, int T, size_t xs,
                                   int cols) {
  std::vector<float> Xa(static_cast<size_t>(T) * static_cast<size_t>(cols));
  for (int t = 0; t < T; ++t) {
    const float* x = &X[static_cast<size_t>(t) * xs];
    float* out = &Xa[static_cast<size_t>(t) * static_cast<size_t>(cols)];
    if (ops::uses_arranged(f))
      ops::arrange_activations(f, x, cols, out);
    else
      std::copy(x, x + cols, out);
  }
  return Xa;
}

}  // namespace nj::testing
