// Kernel dispatch, the threaded matmul, and the small single-vector kernels.
#include "engine/ops/kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/ops/parallel.h"
#include "engine/util/status.h"

namespace nj::ops {

namespace scalar {
const KernelTable& table();
}
namespace avx2 {
const KernelTable& table();
}
namespace avx512 {
const KernelTable& table();
}

const KernelTable& kernel_table(SimdLevel level) {
  NJ_CHECK_MSG(level <= detect_simd_level(), "kernel table for a SIMD level this CPU lacks");
  switch (level) {
    case SimdLevel::kAvx512:
      return avx512::table();
    case SimdLevel::kAvx2:
      return avx2::table();
    case SimdLevel::kScalar:
      break;
  }
  return scalar::table();
}

const KernelTable& kernels() {
  return kernel_table(active_simd_level());
}

namespace {

struct FreeScratch {
  void operator()(float* p) const { std::free(p); }
};
thread_local std::unique_ptr<float, FreeScratch> t_scratch;
thread_local size_t t_scratch_floats = 0;

}  // namespace

float* scratch_floats(size_t floats) {
  if (floats > t_scratch_floats) {
    const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    t_scratch.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    NJ_CHECK_MSG(t_scratch != nullptr, "out of memory for kernel scratch");
    t_scratch_floats = bytes / sizeof(float);
  }
  return t_scratch.get();
}

size_t scratch_bytes() {
  return t_scratch_floats * sizeof(float);
}

namespace {

void arrange_pairs(const float* x, int n, float* out) {
  const int full = n / 32;
  for (int b = 0; b < full; ++b) {
    const float* xb = x + 32 * b;
    float* ob = out + 32 * b;
    for (int j = 0; j < 16; ++j) {
      ob[j] = xb[2 * j];
      ob[16 + j] = xb[2 * j + 1];
    }
  }
  for (int i = 32 * full; i < n; ++i) out[i] = x[i];
}

void arrange_mxfp4(const float* x, int n, float* out) {
  const int nblocks = n / 32;
  for (int b0 = 0; b0 < nblocks; b0 += 4) {
    const int lanes = 4 * std::min(4, nblocks - b0);
    const float* xc = x + 32 * static_cast<size_t>(b0);
    float* oc = out + 32 * static_cast<size_t>(b0);
    for (int j = 0; j < lanes; ++j)
      for (int e = 0; e < 8; ++e) oc[e * lanes + j] = xc[8 * j + e];
  }
}

}  // namespace

void arrange_activations(MatFormat f, const float* x, int n, float* out) {
  switch (f) {
    case MatFormat::kBF16:
      return arrange_pairs(x, n, out);
    case MatFormat::kMxfp4:
      NJ_CHECK_MSG(n % 32 == 0, "MXFP4 rows hold whole 32-element blocks");
      return arrange_mxfp4(x, n, out);
    case MatFormat::kF32:
    case MatFormat::kF16:
      break;
  }
  NJ_CHECK_MSG(false, "F32 and F16 rows read their activations as they are");
}

namespace {

// Floats between two token rows of prepared activations: whole 64-byte lines, an odd number of
// them, so that consecutive token rows start in different L1 sets. With K3's hidden width,
// 7168 floats, unpadded rows are 7 x 4096 bytes apart and the rows of a token tile all map to
// one set. Measured with the tiles (one thread, [1024][7168], T = 256): F32 42 -> 53 % of the
// FMA probe when its token rows are copied to this stride; BF16 and MXFP4 unchanged.
size_t prepared_stride(int cols) {
  const size_t lines = (static_cast<size_t>(cols) + 15) / 16;
  return 16 * (lines % 2 ? lines : lines + 1);
}

// Returns what the row kernels should read for T token rows of X and its stride. BF16 and
// MXFP4 rows read their activations in an order of their own (kernels.h): arranges them into
// thread-local scratch. F32 and F16 rows read them as they are; several token rows are copied
// to the scratch unless their stride already is a prepared one.
const float* prepare_x(const MatRef& W, const float* X, int T, size_t xs, size_t* stride) {
  const size_t ps = prepared_stride(W.cols);
  *stride = xs;
  if (!uses_arranged(W.format) && (T == 1 || (xs % 16 == 0 && (xs / 16) % 2 == 1))) return X;
  // Aligned to a cache line: the row kernels load whole 64-byte vectors of it.
  thread_local std::vector<float> storage;
  const size_t n = static_cast<size_t>(T) * ps;
  storage.resize(n + 16);
  void* p = storage.data();
  size_t space = storage.size() * sizeof(float);
  float* prepared = static_cast<float*>(std::align(64, n * sizeof(float), p, space));
  // Many rows (a prefill, a sweep) are arranged over the threads.
  parallel_rows(T, static_cast<double>(W.cols), [&](int first, int last) {
    for (int t = first; t < last; ++t) {
      const float* x = X + static_cast<size_t>(t) * xs;
      float* out = prepared + static_cast<size_t>(t) * ps;
      if (uses_arranged(W.format))
        arrange_activations(W.format, x, W.cols, out);
      else
        std::copy(x, x + W.cols, out);
    }
  });
  *stride = ps;
  return prepared;
}

}  // namespace

void matmul_serial(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys) {
  if (W.rows == 0 || T == 0) return;
  size_t xin_stride;
  const float* Xin = prepare_x(W, X, T, xs, &xin_stride);
  kernels().matmul_rows(W, Xin, T, xin_stride, Y, ys, 0, W.rows);
}

void matmul_range(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys, int r0,
                  int r1) {
  if (r0 >= r1 || T == 0) return;
  size_t xin_stride;
  const float* Xin = prepare_x(W, X, T, xs, &xin_stride);
  kernels().matmul_rows(W, Xin, T, xin_stride, Y, ys, r0, r1);
}

void matmul(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys) {
  const KernelTable& k = kernels();
  if (W.rows == 0 || T == 0) return;
  size_t xin_stride;
  const float* Xin = prepare_x(W, X, T, xs, &xin_stride);
  // Small products are not worth waking the thread team (a fork/join costs tens of
  // microseconds with passive waiting; 512K multiply-adds take about as long on one core).
  const double work = static_cast<double>(W.rows) * W.cols * T;
  const int threads = work < 524288.0 ? 1 : std::min(omp_get_max_threads(), (W.rows + 3) / 4);
  if (threads <= 1) {
    k.matmul_rows(W, Xin, T, xin_stride, Y, ys, 0, W.rows);
    return;
  }
  // Static split into 4-row-aligned ranges; each row is computed by exactly one thread.
#pragma omp parallel num_threads(threads)
  {
    const int n = omp_get_num_threads();
    const int id = omp_get_thread_num();
    const int groups = (W.rows + 3) / 4;
    const int g0 = static_cast<int>(static_cast<int64_t>(groups) * id / n);
    const int g1 = static_cast<int>(static_cast<int64_t>(groups) * (id + 1) / n);
    const int r0 = std::min(W.rows, 4 * g0), r1 = std::min(W.rows, 4 * g1);
    if (r0 < r1) k.matmul_rows(W, Xin, T, xin_stride, Y, ys, r0, r1);
  }
}

float dot(const float* a, const float* b, int n) {
  return kernels().dot(a, b, n);
}

void rmsnorm(const float* x, const float* w, int n, float eps, float* y) {
  const float ss = dot(x, x, n);
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int i = 0; i < n; ++i) y[i] = w[i] * (x[i] * inv);
}

void l2norm(float* x, int n, float eps) {
  const float inv = 1.0f / std::sqrt(dot(x, x, n) + eps);
  for (int i = 0; i < n; ++i) x[i] = x[i] * inv;
}

void rmsnorm_rows(const float* x, const float* w, int rows, int n, float eps, float* y) {
  const size_t ns = static_cast<size_t>(n);
  parallel_rows(rows, 2.0 * n, [&](int first, int last) {
    for (int t = first; t < last; ++t) rmsnorm(x + t * ns, w, n, eps, y + t * ns);
  });
}

void copy_rows(const float* from, int rows, size_t n, float* to) {
  parallel_rows(rows, static_cast<double>(n), [&](int first, int last) {
    std::copy(from + first * n, from + last * n, to + first * n);
  });
}

void add_rows(const float* from, int rows, size_t n, float* to) {
  parallel_rows(rows, static_cast<double>(n), [&](int first, int last) {
    for (size_t i = first * n; i < last * n; ++i) to[i] = to[i] + from[i];
  });
}

void exp_inplace(float* x, int n) {
  for (int i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

void situ_glu(const float* g, const float* u, int n, float beta, float lin_beta, float* y) {
  kernels().situ_glu(g, u, n, beta, lin_beta, y);
}

void silu_inplace(float* x, int n) {
  kernels().sigmoid_gate(x, x, n, x);
}

void sigmoid_inplace(float* x, int n) {
  kernels().sigmoid(x, n, x);
}

void sigmoid_gate(float* x, const float* g, int n) {
  kernels().sigmoid_gate(x, g, n, x);
}

void softmax_inplace(float* x, int n) {
  float m = x[0];
  for (int i = 1; i < n; ++i) m = std::max(m, x[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] = x[i] / sum;
}

void axpy(float a, const float* x, float* y, int n) {
  kernels().axpy(a, x, y, n);
}

}  // namespace nj::ops
