// The engine's numerical kernels: pure functions over spans. They allocate nothing, log
// nothing and do no I/O (the dispatching wrappers below own small per-thread scratch).
//
// DETERMINISM. Every kernel computes the same bits on every SIMD level and thread count,
// because each has one canonical order of floating-point operations that every path
// follows exactly:
//  * Dot products (F32 and F16 rows, attention scores, norms) use 16 lanes: lane j
//    accumulates the elements i ≡ j (mod 16) in increasing i as acc = fma(w_i, x_i, acc),
//    starting from +0; elements past the end leave their lane untouched. The 16 lanes are
//    then combined by a fixed tree: s[i] += s[i+8] (i<8), s[i] += s[i+4], s[i] += s[i+2],
//    s[0] += s[1]. AVX-512 holds the lanes in one register, AVX2 in two, scalar in an array.
//  * BF16 rows take elements in pairs, which lets SIMD widen 32 of them with two
//    instructions: in each 32-element chunk c, lane j does acc = fma(w[32c+2j], x[32c+2j],
//    acc), then acc = fma(w[32c+2j+1], x[32c+2j+1], acc); elements past the end are skipped.
//    Same 16 lanes, same tree.
//  * MXFP4 rows: per 32-element block b with scale code s, lane j forms
//    t = E2M1(lo nibble of byte j) * x[32b+2j]; t = fma(E2M1(hi nibble), x[32b+2j+1], t);
//    acc[b % 4]_j = fma(t, f, acc[b % 4]_j) with f = 2^(s-127), and f = 0 for s == 255, so
//    such a block contributes exactly zero (acc is never -0, and t is finite for finite
//    activations). Four accumulator sets (by block number mod 4) keep four independent
//    fma chains in flight; at the end lane j is (acc0_j + acc1_j) + (acc2_j + acc3_j), and
//    the lanes are combined by the same tree.
//  * Column-wise accumulations (Sᵀk in KDA, Σ p_t L_t in MLA, transposed products, mixing
//    of residual sources) accumulate each output element sequentially over the summed index
//    with fma, so vectorizing across outputs never changes a bit.
//  * Threads split output rows (or heads) statically; no value is ever reduced across threads.
// Contraction is disabled project-wide (-ffp-contract=off): every fma is written out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/ops/cpu.h"
#include "engine/ops/mat.h"

namespace nj::ops {

// One implementation set per SIMD level; see kernels_{scalar,avx2,avx512}.cpp.
struct KernelTable {
  SimdLevel level;

  // Y[t*ys + r] = W[r] · X[t*xs ...] for r in [r0, r1), t < T.
  // For BF16 and MXFP4, X must be pre-arranged in pairs as produced by arrange_pairs.
  void (*matmul_rows)(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys,
                      int r0, int r1);
  // Canonical 16-lane dot product.
  float (*dot)(const float* a, const float* b, int n);
  // out[c] = Σ_d W[d][c] · x[d] over d < W.rows, sequentially in d, for c < W.cols.
  // REQUIRES: W is F32, BF16 or F16.
  void (*matvec_t)(const MatRef& W, const float* x, float* out);
  // One KDA head over T tokens (k3-model.md §4), state S [D][D] (row = key channel) updated in
  // place. q, k, v, alpha: [T] rows of `stride` floats, this head's D values at offset 0;
  // beta: [T] with `beta_stride`; o: [T][stride] output (before o_norm). u, delta: scratch [D].
  void (*kda_head)(int T, int D, const float* q, const float* k, const float* v,
                   const float* alpha, const float* beta, size_t stride, size_t beta_stride,
                   float* S, float* o, float* u, float* delta);
  // y[i] = fma(a, x[i], y[i]).
  void (*axpy)(float a, const float* x, float* y, int n);
};

// The table for a level. REQUIRES: the CPU supports `level`.
const KernelTable& kernel_table(SimdLevel level);
// The table for active_simd_level().
const KernelTable& kernels();

// Rearranges activations for the paired formats (BF16, MXFP4): in each full 32-element
// chunk, the 16 even elements then the 16 odd ones; a partial last chunk is copied as is.
void arrange_pairs(const float* x, int n, float* out);
// Whether a format's rows read arranged activations.
inline bool uses_pairs(MatFormat f) { return f == MatFormat::kBF16 || f == MatFormat::kMxfp4; }

// Y[t][r] = W[r] · X[t] for all rows, T tokens. X: [T][xs], Y: [T][ys]. Splits rows over
// the OpenMP threads. Bit-identical for any thread count and SIMD level.
void matmul(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys);
// The same on the calling thread only: for use inside a parallel region (per-head work).
void matmul_serial(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys);
inline void matvec(const MatRef& W, const float* x, float* y) {
  matmul(W, x, 1, static_cast<size_t>(W.cols), y, static_cast<size_t>(W.rows));
}

// --- Small kernels over one vector (single-threaded; use the canonical dot) ---

float dot(const float* a, const float* b, int n);
// y = w ⊙ x / sqrt(mean(x²) + eps); y may alias x.
void rmsnorm(const float* x, const float* w, int n, float eps, float* y);
// x ← x · (Σx² + eps)^(-1/2)   (a sum, not a mean: KDA's q/k normalization).
void l2norm(float* x, int n, float eps);
// y = (beta·tanh(g/beta)·σ(g)) ⊙ (lin·tanh(u/lin)); y may alias g or u.
void situ_glu(const float* g, const float* u, int n, float beta, float lin_beta, float* y);
void silu_inplace(float* x, int n);
void sigmoid_inplace(float* x, int n);
float sigmoid(float x);
// In place; max-subtracted; the sum is sequential.
void softmax_inplace(float* x, int n);
// y[i] = fma(a, x[i], y[i]).
void axpy(float a, const float* x, float* y, int n);

}  // namespace nj::ops
