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
//  * MXFP4 rows go in chunks of 128 elements: four 32-element blocks, 64 packed bytes and
//    four scale codes (a row's last chunk may hold fewer blocks). In a chunk with nb
//    blocks, lane j < 4·nb covers its eight elements 8j + n, n < 8 (byte 4j + n/2 of the
//    chunk, the low nibble for even n), which all lie in the chunk's block j/4. With
//    w_n = E2M1(that nibble) and x_n the element's activation, lane j forms
//      t0 = w0 * x0, t1 = w1 * x1, then t0 = fma(w_n, x_n, t0) for n = 2, 4, 6 and
//      t1 = fma(w_n, x_n, t1) for n = 3, 5, 7,
//    and does acc_j = fma(t0 + t1, f, acc_j) with f = 2^(s-127) for the block's scale code
//    s, and f = 0 for s == 255 (such a block adds only zeros, for finite activations).
//    Lanes of missing blocks are left untouched, and the 16 lanes are combined by the
//    same tree. Because a lane stays inside one block, SIMD code decodes a whole chunk
//    from one 64-byte load by shifting it and applies each scale once per chunk.
//  * Column-wise accumulations (Sᵀk in KDA, Σ p_t L_t in MLA, transposed products, mixing
//    of residual sources) accumulate each output element sequentially over the summed index
//    with fma, so vectorizing across outputs never changes a bit.
//  * Products of many token rows (kernels_tiles.inc) load a tile of weight rows once for many
//    token rows and keep each (weight row, token row) pair's 16 lanes in registers, or in
//    memory between blocks of columns; every pair still does exactly the operations above in
//    the order above, so a product gives the same bits for any number of token rows, any
//    tiling and any row range. Products of more token rows (kernels_packed.inc) pack a panel
//    of weight rows once into a cache-resident buffer (dense rows as 64-byte chunks, BF16
//    widened in registers or when packed, F16 when packed; MXFP4 decoded in registers) and
//    run register-blocked micro-tiles over it for every token row: the same operations in
//    the same order again, per pair.
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

  // Y[t*ys + r] = W[r] · X[t*xs ...] for r in [r0, r1), t < T; writes nothing else. A few
  // token rows go row by row, more by tiles (kernels_tiles.inc), many through packed panels
  // (kernels_packed.inc); the bits are the same. For BF16 and MXFP4, X must be arranged by
  // arrange_activations. Runs on the calling thread; uses up to ~70 KB of its stack and, for
  // packed panels, the thread's scratch_floats (packed_scratch_bytes).
  void (*matmul_rows)(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys,
                      int r0, int r1);
  // The most bytes matmul_rows takes from the thread's scratch_floats, for a matrix of any
  // format with at most `cols` columns and, if MXFP4, `mxfp4_rows` rows (the planner counts
  // it for every thread).
  size_t (*packed_scratch_bytes)(int cols, int mxfp4_rows);
  // Canonical 16-lane dot product.
  float (*dot)(const float* a, const float* b, int n);
  // out[c] = Σ_d W[d][c] · x[d] over d < W.rows, sequentially in d, for c < W.cols.
  // REQUIRES: W is F32, BF16 or F16.
  void (*matvec_t)(const MatRef& W, const float* x, float* out);
  // One KDA head over T tokens (k3-model.md §4), state S [D][D] (row = key channel) updated in
  // place. q, k, v, alpha: [T] rows of `stride` floats, this head's D values at offset 0;
  // beta: [T] with `beta_stride`; o: [T][stride] output (before o_norm). u, delta: scratch [D].
  void (*kda_head)(int T, int D, const float* q, const float* k, const float* v, const float* alpha,
                   const float* beta, size_t stride, size_t beta_stride, float* S, float* o,
                   float* u, float* delta);
  // y[i] = fma(a, x[i], y[i]).
  void (*axpy)(float a, const float* x, float* y, int n);
  // The elementwise functions in their canonical formulas (kernels_math.inc); y may alias the
  // inputs. SiTU-GLU; sigmoid; y = x · sigmoid(g) (SiLU when g = x).
  void (*situ_glu)(const float* g, const float* u, int n, float beta, float lin_beta, float* y);
  void (*sigmoid)(const float* x, int n, float* y);
  void (*sigmoid_gate)(const float* x, const float* g, int n, float* y);
  // KDA's causal depthwise conv: out[t][c] = Σ_j taps[c·K + j] · ext[(t + j)·P + c] for t < T,
  // c < P, summed by fma from +0 in increasing j. REQUIRES: K <= 8.
  void (*short_conv)(const float* ext, const float* taps, int T, int P, int K, float* out);
};

// Scratch of the products of many token rows (kernels_packed.inc): at least `floats` floats,
// 64-byte aligned, owned by the calling thread and reused by its next call (contents
// unspecified; grows, never shrinks). One user per thread at a time.
float* scratch_floats(size_t floats);
// Bytes the calling thread's scratch holds now.
size_t scratch_bytes();

// The table for a level. REQUIRES: the CPU supports `level`.
const KernelTable& kernel_table(SimdLevel level);
// The table for active_simd_level().
const KernelTable& kernels();

// Whether a format's row kernels read activations in an order of their own.
inline bool uses_arranged(MatFormat f) {
  return f == MatFormat::kBF16 || f == MatFormat::kMxfp4;
}
// Puts n activations into the order in which rows of format f consume them (`out` holds n
// floats, no aliasing). REQUIRES: uses_arranged(f).
//  * BF16: in each full 32-element chunk, the 16 even elements then the 16 odd ones; a
//    partial last chunk as is;
//  * MXFP4 (n a multiple of 32): in each 128-element chunk with L = 4·nb lanes (see the
//    order above), element 8j + n of the chunk goes to position n·L + j.
void arrange_activations(MatFormat f, const float* x, int n, float* out);

// Y[t][r] = W[r] · X[t] for all rows, T tokens. X: [T][xs], Y: [T][ys]. Splits rows over
// the OpenMP threads. Bit-identical for any thread count, SIMD level and T (row t of Y is what
// a product of X's row t alone gives).
void matmul(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys);
// The same on the calling thread only: for use inside a parallel region (per-head work).
void matmul_serial(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys);
// Rows [r0, r1) of the same product on the calling thread: Y[t][r] for r in [r0, r1), nothing
// else written; for a parallel region that splits several products' rows itself (the MoE's
// expert groups). Same bits as matmul for those rows. REQUIRES: 0 <= r0 <= r1 <= W.rows.
void matmul_range(const MatRef& W, const float* X, int T, size_t xs, float* Y, size_t ys, int r0,
                  int r1);
inline void matvec(const MatRef& W, const float* x, float* y) {
  matmul(W, x, 1, static_cast<size_t>(W.cols), y, static_cast<size_t>(W.rows));
}

// --- Small kernels over one vector (single-threaded; use the canonical dot) ---

float dot(const float* a, const float* b, int n);
// y = w ⊙ x / sqrt(mean(x²) + eps); y may alias x.
void rmsnorm(const float* x, const float* w, int n, float eps, float* y);
// rmsnorm of `rows` rows of n floats (x and y with a stride of n), rows split over the OpenMP
// threads when there are many (each row's bits as rmsnorm's).
void rmsnorm_rows(const float* x, const float* w, int rows, int n, float eps, float* y);
// to = from and to += from over `rows` rows of n floats; rows split over the threads.
void copy_rows(const float* from, int rows, size_t n, float* to);
void add_rows(const float* from, int rows, size_t n, float* to);
// x ← x · (Σx² + eps)^(-1/2)   (a sum, not a mean: KDA's q/k normalization).
void l2norm(float* x, int n, float eps);
// y = (beta·tanh(g/beta)·σ(g)) ⊙ (lin·tanh(u/lin)); y may alias g or u. Its exp and tanh are
// the engine's own (kernels_math.inc), vectorised and equal on every SIMD level.
void situ_glu(const float* g, const float* u, int n, float beta, float lin_beta, float* y);
// Sigmoid and SiLU are the engine's own (kernels_math.inc), like SiTU's. exp_inplace is libm's
// expf per element: where exp's result compounds (KDA's decay over positions, softmax) the
// engine's 0.84-ulp exp measured beyond the golden tests' 1e-4 from the float64 reference,
// where glibc's correctly rounded expf does not (engine/ops/numerics.h).
void exp_inplace(float* x, int n);
void silu_inplace(float* x, int n);
void sigmoid_inplace(float* x, int n);
// x[i] ← x[i] · sigmoid(g[i]).
void sigmoid_gate(float* x, const float* g, int n);
// In place; max-subtracted; the sum is sequential.
void softmax_inplace(float* x, int n);
// y[i] = fma(a, x[i], y[i]).
void axpy(float a, const float* x, float* y, int n);

}  // namespace nj::ops
