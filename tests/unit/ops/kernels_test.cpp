// Kernels: every SIMD level equals the scalar reference bit for bit, the scalar reference
// equals exact (double) arithmetic within rounding, and thread count changes nothing.
#include "engine/ops/kernels.h"
#include "tests/unit/ops/simd_levels.h"
#include "tests/unit/ops/test_matrix.h"

#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace nj::ops {
namespace {

using testing::arranged;
using testing::bits;
using testing::levels;
using testing::make_matrix;
using testing::random_vec;
using testing::Rng;
using testing::TestMatrix;

TEST_CASE("matmul equals the scalar reference bit for bit on every SIMD level", "[engine][ops]") {
  Rng rng(7);
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4}) {
    for (int cols : {1, 15, 16, 17, 31, 33, 64, 100, 128, 700, 1031}) {
      if (f == MatFormat::kMxfp4) cols = std::max(32, cols / 32 * 32);
      for (int rows : {1, 3, 4, 9}) {
        for (int T : {1, 3}) {
          TestMatrix m = make_matrix(f, rows, cols, rng);
          auto X = random_vec(static_cast<size_t>(T) * cols, rng);
          std::vector<float> Xa = X;
          if (uses_arranged(f))
            for (int t = 0; t < T; ++t)
              arrange_activations(f, &X[static_cast<size_t>(t) * cols], cols,
                                  &Xa[static_cast<size_t>(t) * cols]);
          std::vector<float> ref(static_cast<size_t>(T) * rows);
          kernel_table(SimdLevel::kScalar)
              .matmul_rows(m.ref, Xa.data(), T, cols, ref.data(), rows, 0, rows);
          for (SimdLevel level : levels()) {
            std::vector<float> y(ref.size(), -1.0f);
            kernel_table(level).matmul_rows(m.ref, Xa.data(), T, cols, y.data(), rows, 0, rows);
            INFO(mat_format_name(f) << " " << rows << "x" << cols << " T=" << T << " level "
                                    << simd_level_name(level));
            for (size_t i = 0; i < y.size(); ++i) REQUIRE(bits(y[i]) == bits(ref[i]));
          }
          // The reference is exact arithmetic up to float rounding of the partial sums.
          for (int t = 0; t < T; ++t)
            for (int r = 0; r < rows; ++r) {
              double e = 0, mag = 0;
              for (int c = 0; c < cols; ++c) {
                double p = m.exact[static_cast<size_t>(r) * cols + c] *
                           X[static_cast<size_t>(t) * cols + c];
                e += p;
                mag += std::fabs(p);
              }
              INFO(mat_format_name(f) << " " << rows << "x" << cols);
              REQUIRE(std::fabs(ref[static_cast<size_t>(t) * rows + r] - e) <= 1e-6 * mag + 1e-30);
            }
        }
      }
    }
  }
}

TEST_CASE("MXFP4 rows taken several per pass equal the scalar reference for any row range",
          "[engine][ops]") {
  // SIMD levels take rows in groups (4 on AVX-512) and the rest singly; block counts that
  // are not a multiple of 4 leave a partial chunk, and counts past 16 make AVX-512 read a
  // partial group of scale codes. Every row must still follow the canonical order.
  Rng rng(13);
  const int rows = 13, T = 2;
  for (int nblocks : {1, 5, 23, 36}) {
    const int cols = 32 * nblocks;
    TestMatrix m = make_matrix(MatFormat::kMxfp4, rows, cols, rng);
    auto X = random_vec(static_cast<size_t>(T) * cols, rng);
    std::vector<float> Xa(X.size());
    for (int t = 0; t < T; ++t)
      arrange_activations(MatFormat::kMxfp4, &X[static_cast<size_t>(t) * cols], cols,
                          &Xa[static_cast<size_t>(t) * cols]);
    std::vector<float> ref(static_cast<size_t>(T) * rows);
    kernel_table(SimdLevel::kScalar)
        .matmul_rows(m.ref, Xa.data(), T, cols, ref.data(), rows, 0, rows);
    for (SimdLevel level : levels())
      for (auto [r0, r1] :
           {std::pair{0, 13}, std::pair{1, 12}, std::pair{3, 8}, std::pair{9, 13}}) {
        std::vector<float> y(ref.size(), -1.0f);
        kernel_table(level).matmul_rows(m.ref, Xa.data(), T, cols, y.data(), rows, r0, r1);
        INFO(nblocks << " blocks, rows [" << r0 << ", " << r1 << ") level "
                     << simd_level_name(level));
        for (int t = 0; t < T; ++t)
          for (int r = r0; r < r1; ++r) {
            const size_t i = static_cast<size_t>(t) * rows + static_cast<size_t>(r);
            REQUIRE(bits(y[i]) == bits(ref[i]));
          }
      }
  }
}

TEST_CASE("matmul over many token rows equals the per-row reference bit for bit on every level",
          "[engine][ops][tiles]") {
  // Token counts cross the row-kernel/tile threshold, the tile widths and the token blocks (16
  // rows, 66 for F32); column counts give whole chunks only, a partial last chunk, and rows
  // long enough to span several blocks of columns (2100 BF16 / F32 columns; 4000 MXFP4
  // columns = 125 MXFP4 blocks, whose last chunk holds one); 37 rows make two 16-row panels
  // and a partial one, and the row ranges start and end inside and outside row tiles and
  // panels. Every level must give the bits of the scalar row-at-a-time reference and of its
  // own one-token-row-per-call result.
  Rng rng(19);
  const int rows = 37;
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4}) {
    const std::vector<int> col_counts =
        f == MatFormat::kMxfp4 ? std::vector<int>{128, 160, 4000} : std::vector<int>{48, 100, 2100};
    for (int cols : col_counts) {
      TestMatrix m = make_matrix(f, rows, cols, rng);
      for (int T : {1, 2, 3, 5, 7, 17, 65, 133}) {
        auto X = random_vec(static_cast<size_t>(T) * cols, rng);
        const std::vector<float> Xa = arranged(f, X, T, static_cast<size_t>(cols), cols);
        std::vector<float> ref(static_cast<size_t>(T) * rows);
        kernel_table(SimdLevel::kScalar)
            .matmul_rows(m.ref, Xa.data(), T, cols, ref.data(), rows, 0, rows);
        for (SimdLevel level : levels()) {
          const KernelTable& k = kernel_table(level);
          std::vector<float> one(ref.size(), -1.0f);
          for (int t = 0; t < T; ++t)
            k.matmul_rows(m.ref, &Xa[static_cast<size_t>(t) * cols], 1, cols, &one[t * rows], rows,
                          0, rows);
          for (auto [r0, r1] : {std::pair{0, 37}, std::pair{1, 36}, std::pair{4, 8},
                                std::pair{9, 37}, std::pair{5, 6}, std::pair{16, 33}}) {
            std::vector<float> y(ref.size(), -1.0f);
            k.matmul_rows(m.ref, Xa.data(), T, cols, y.data(), rows, r0, r1);
            INFO(mat_format_name(f) << " " << rows << "x" << cols << " T=" << T << " rows [" << r0
                                    << ", " << r1 << ") level " << simd_level_name(level));
            for (int t = 0; t < T; ++t)
              for (int r = 0; r < rows; ++r) {
                const size_t i = static_cast<size_t>(t) * rows + static_cast<size_t>(r);
                if (r < r0 || r >= r1) {
                  REQUIRE(bits(y[i]) == bits(-1.0f));  // rows outside the range are not written
                  continue;
                }
                REQUIRE(bits(y[i]) == bits(ref[i]));
                REQUIRE(bits(y[i]) == bits(one[i]));
              }
          }
        }
      }
    }
  }
}

TEST_CASE(
    "threaded matmul over many token rows gives the same bits for 1 and 2 threads on every level",
    "[engine][ops][tiles]") {
  // ops::matmul arranges the activations itself, splits rows over the threads and reads X and
  // writes Y with strides wider than the rows; every combination must equal the scalar
  // row-at-a-time reference.
  Rng rng(23);
  const int rows = 517;
  const SimdLevel before = active_simd_level();
  const int threads_before = omp_get_max_threads();
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kMxfp4}) {
    const int cols = f == MatFormat::kMxfp4 ? 288 : 264;
    TestMatrix m = make_matrix(f, rows, cols, rng);
    for (int T : {1, 5, 7, 17, 65}) {
      const size_t xs = static_cast<size_t>(cols) + 5, ys = rows + 3;
      auto X = random_vec(static_cast<size_t>(T) * xs, rng);
      const std::vector<float> Xa = arranged(f, X, T, xs, cols);
      std::vector<float> ref(static_cast<size_t>(T) * ys, -1.0f);
      kernel_table(SimdLevel::kScalar)
          .matmul_rows(m.ref, Xa.data(), T, cols, ref.data(), ys, 0, rows);
      for (SimdLevel level : levels())
        for (int threads : {1, 2}) {
          REQUIRE(force_simd_level(level).ok());
          omp_set_num_threads(threads);
          std::vector<float> y(ref.size(), -1.0f);
          matmul(m.ref, X.data(), T, xs, y.data(), ys);
          INFO(mat_format_name(f) << " T=" << T << " level " << simd_level_name(level) << ", "
                                  << threads << " threads");
          REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
        }
    }
  }
  REQUIRE(force_simd_level(before).ok());
  omp_set_num_threads(threads_before);
}

TEST_CASE("MXFP4 products of 2 to 7 token rows equal the per-row reference on every level",
          "[engine][ops][tiles]") {
  // The few-token-row products the MoE's experts get with a batch (8 sequences x top-8 over 192
  // experts: 1-3 rows each): AVX-512 takes them in groups of up to 4 token rows that share each
  // decoded chunk (as many as have 16 KiB of activations: 4 to 3 here; below its tile threshold of
  // 8), AVX2 by tiles, scalar row by row. Block counts give whole chunks (4, 36), a partial last
  // chunk (1, 3, 5, 37: one to three blocks) and more than 16 blocks (a partial group of scale
  // codes); strides wider than the rows; row ranges that start and end inside the 4-row groups of
  // one token row. Each (weight row, token row) pair must give the scalar row-at-a-time bits,
  // through the row kernels and through the threaded matmul with 1 and 2 threads (the wide matrices
  // are large enough for ops::matmul to split them from T = 3 on).
  Rng rng(31);
  const SimdLevel before = active_simd_level();
  const int threads_before = omp_get_max_threads();
  for (int nblocks : {1, 3, 4, 5, 36, 37}) {
    const int cols = 32 * nblocks, rows = nblocks > 30 ? 149 : 11;
    TestMatrix m = make_matrix(MatFormat::kMxfp4, rows, cols, rng);
    for (int T = 2; T <= 7; ++T) {
      const size_t xs = static_cast<size_t>(cols) + 16, ys = rows + 5;
      auto X = random_vec(static_cast<size_t>(T) * xs, rng);
      std::vector<float> Xa(X.size());
      for (int t = 0; t < T; ++t)
        arrange_activations(MatFormat::kMxfp4, &X[static_cast<size_t>(t) * xs], cols,
                            &Xa[static_cast<size_t>(t) * xs]);
      std::vector<float> ref(static_cast<size_t>(T) * ys, -1.0f);
      for (int t = 0; t < T; ++t)
        kernel_table(SimdLevel::kScalar)
            .matmul_rows(m.ref, &Xa[static_cast<size_t>(t) * xs], 1, xs,
                         &ref[static_cast<size_t>(t) * ys], ys, 0, rows);
      for (SimdLevel level : levels()) {
        for (auto [r0, r1] :
             {std::pair{0, 11}, std::pair{1, 10}, std::pair{2, 7}, std::pair{5, 6}}) {
          std::vector<float> y(ref.size(), -1.0f);
          kernel_table(level).matmul_rows(m.ref, Xa.data(), T, xs, y.data(), ys, r0, r1);
          INFO(nblocks << " blocks, T=" << T << " rows [" << r0 << ", " << r1 << ") level "
                       << simd_level_name(level));
          for (int t = 0; t < T; ++t)
            for (int r = 0; r < static_cast<int>(ys); ++r) {
              const size_t i = static_cast<size_t>(t) * ys + static_cast<size_t>(r);
              if (r < r0 || r >= r1)
                REQUIRE(bits(y[i]) == bits(-1.0f));  // nothing outside the range is written
              else
                REQUIRE(bits(y[i]) == bits(ref[i]));
            }
        }
        for (int threads : {1, 2}) {
          REQUIRE(force_simd_level(level).ok());
          omp_set_num_threads(threads);
          std::vector<float> y(ref.size(), -1.0f);
          matmul(m.ref, X.data(), T, xs, y.data(), ys);
          INFO(nblocks << " blocks, T=" << T << " level " << simd_level_name(level) << ", "
                       << threads << " threads");
          REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
        }
      }
    }
  }
  REQUIRE(force_simd_level(before).ok());
  omp_set_num_threads(threads_before);
}

TEST_CASE("every E8M0 scale code gives the same bits on every level", "[engine][ops]") {
  // Row r has scale code r in all its blocks, so each of the 256 codes decides one output
  // (AVX-512 computes the factors in registers, AVX2 reads them from a table; the fifth
  // block is a partial chunk, which every level leaves to the scalar code); small
  // activations keep 2^127 blocks finite.
  Rng rng(17);
  const int rows = 256, nb = 5, cols = 32 * nb;
  std::vector<uint8_t> packed(static_cast<size_t>(rows) * cols / 2);
  std::vector<uint8_t> scales(static_cast<size_t>(rows) * nb);
  for (auto& b : packed) b = static_cast<uint8_t>(rng.next());
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i / nb);
  MatRef W{MatFormat::kMxfp4, rows, cols, packed.data(), scales.data()};
  auto x = random_vec(cols, rng);
  for (auto& v : x) v = std::ldexp(v, -40);
  std::vector<float> xa(cols), ref(rows), y(rows);
  arrange_activations(MatFormat::kMxfp4, x.data(), cols, xa.data());
  kernel_table(SimdLevel::kScalar).matmul_rows(W, xa.data(), 1, cols, ref.data(), rows, 0, rows);
  for (float v : ref) REQUIRE(std::isfinite(v));
  for (SimdLevel level : levels()) {
    kernel_table(level).matmul_rows(W, xa.data(), 1, cols, y.data(), rows, 0, rows);
    for (int r = 0; r < rows; ++r) {
      INFO("scale code " << r << " level " << simd_level_name(level));
      REQUIRE(bits(y[static_cast<size_t>(r)]) == bits(ref[static_cast<size_t>(r)]));
    }
  }
}

TEST_CASE("MXFP4 blocks with scale code 255 contribute exactly zero", "[engine][ops]") {
  std::vector<uint8_t> packed(16, 0x77);  // every element 6.0
  std::vector<uint8_t> scales = {kE8M0Zero};
  MatRef W{MatFormat::kMxfp4, 1, 32, packed.data(), scales.data()};
  std::vector<float> x(32, 1.0f), xa(32), y(1, 5.0f);
  arrange_activations(MatFormat::kMxfp4, x.data(), 32, xa.data());
  for (SimdLevel level : levels()) {
    kernel_table(level).matmul_rows(W, xa.data(), 1, 32, y.data(), 1, 0, 1);
    CHECK(y[0] == 0.0f);
  }
  scales[0] = 127;  // scale 1: 32 x 6
  for (SimdLevel level : levels()) {
    kernel_table(level).matmul_rows(W, xa.data(), 1, 32, y.data(), 1, 0, 1);
    CHECK(y[0] == 192.0f);
  }
}

TEST_CASE("matmul gives the same bits with 1 and 2 threads", "[engine][ops]") {
  Rng rng(11);
  for (MatFormat f : {MatFormat::kBF16, MatFormat::kMxfp4}) {
    TestMatrix m = make_matrix(f, 517, 256, rng);
    auto X = random_vec(2 * 256, rng);
    std::vector<float> y1(2 * 517), y2(2 * 517);
    omp_set_num_threads(1);
    matmul(m.ref, X.data(), 2, 256, y1.data(), 517);
    omp_set_num_threads(2);
    matmul(m.ref, X.data(), 2, 256, y2.data(), 517);
    for (size_t i = 0; i < y1.size(); ++i) REQUIRE(bits(y1[i]) == bits(y2[i]));
  }
}

TEST_CASE("dot and matvec_t follow the canonical order on every level", "[engine][ops]") {
  Rng rng(3);
  for (int n : {1, 7, 16, 33, 512, 577}) {
    auto a = random_vec(static_cast<size_t>(n), rng), b = random_vec(static_cast<size_t>(n), rng);
    float ref = kernel_table(SimdLevel::kScalar).dot(a.data(), b.data(), n);
    double exact = 0;
    for (int i = 0; i < n; ++i) exact += static_cast<double>(a[i]) * b[i];
    CHECK(std::fabs(ref - exact) < 1e-5);
    for (SimdLevel level : levels())
      REQUIRE(bits(kernel_table(level).dot(a.data(), b.data(), n)) == bits(ref));
  }
  TestMatrix m = make_matrix(MatFormat::kBF16, 24, 40, rng);
  auto x = random_vec(24, rng);
  std::vector<float> ref(40), y(40);
  kernel_table(SimdLevel::kScalar).matvec_t(m.ref, x.data(), ref.data());
  for (int c = 0; c < 40; ++c) {
    double e = 0;
    for (int d = 0; d < 24; ++d)
      e += m.exact[static_cast<size_t>(d) * 40 + c] * x[static_cast<size_t>(d)];
    CHECK(std::fabs(ref[static_cast<size_t>(c)] - e) < 1e-5);
  }
  for (SimdLevel level : levels()) {
    kernel_table(level).matvec_t(m.ref, x.data(), y.data());
    for (int c = 0; c < 40; ++c)
      REQUIRE(bits(y[static_cast<size_t>(c)]) == bits(ref[static_cast<size_t>(c)]));
  }
}

TEST_CASE("the KDA head recurrence matches exact arithmetic and every level",
          "[engine][ops][kda]") {
  Rng rng(5);
  const int T = 6, D = 16;
  auto q = random_vec(T * D, rng), k = random_vec(T * D, rng), v = random_vec(T * D, rng);
  std::vector<float> alpha(T * D), beta(T);
  for (auto& a : alpha) a = 0.5f + 0.5f * std::fabs(rng.uniform());
  for (auto& b : beta) b = std::fabs(rng.uniform());
  // Exact: S_t = diag(alpha) S; u = Sᵀk; S += k (beta (v − u))ᵀ; o = Sᵀ q.
  std::vector<double> S(D * D, 0.0), o_exact(T * D);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) S[i * D + j] *= alpha[t * D + i];
    std::vector<double> u(D, 0.0);
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) u[j] += S[i * D + j] * k[t * D + i];
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) S[i * D + j] += k[t * D + i] * beta[t] * (v[t * D + j] - u[j]);
    for (int j = 0; j < D; ++j) {
      double s = 0;
      for (int i = 0; i < D; ++i) s += S[i * D + j] * q[t * D + i];
      o_exact[t * D + j] = s;
    }
  }
  std::vector<float> ref_o(T * D), ref_S(D * D, 0.0f), u(D), delta(D);
  kernel_table(SimdLevel::kScalar)
      .kda_head(T, D, q.data(), k.data(), v.data(), alpha.data(), beta.data(), D, 1, ref_S.data(),
                ref_o.data(), u.data(), delta.data());
  for (int i = 0; i < T * D; ++i) CHECK(std::fabs(ref_o[i] - o_exact[i]) < 1e-4);
  for (SimdLevel level : levels()) {
    std::vector<float> o(T * D), Sl(D * D, 0.0f);
    kernel_table(level).kda_head(T, D, q.data(), k.data(), v.data(), alpha.data(), beta.data(), D,
                                 1, Sl.data(), o.data(), u.data(), delta.data());
    for (int i = 0; i < T * D; ++i) REQUIRE(bits(o[i]) == bits(ref_o[i]));
    for (int i = 0; i < D * D; ++i) REQUIRE(bits(Sl[i]) == bits(ref_S[i]));
  }
}

// The canonical order of the KDA recurrence written out over whole rows of S (the kernels do
// it in blocks of columns): per token, decay every row and accumulate u, then the delta rule,
// then update every row and accumulate o, each sum over i in increasing order.
void kda_unblocked(int T, int D, const float* q, const float* k, const float* v, const float* alpha,
                   const float* beta, float* S, float* o) {
  std::vector<float> u(D), delta(D);
  for (int t = 0; t < T; ++t) {
    const float *qt = q + t * D, *kt = k + t * D, *vt = v + t * D, *at = alpha + t * D;
    float* ot = o + t * D;
    std::fill(u.begin(), u.end(), 0.0f);
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) {
        S[i * D + j] = S[i * D + j] * at[i];
        u[j] = std::fma(S[i * D + j], kt[i], u[j]);
      }
    for (int j = 0; j < D; ++j) delta[j] = beta[t] * (vt[j] - u[j]);
    for (int j = 0; j < D; ++j) ot[j] = 0.0f;
    for (int i = 0; i < D; ++i)
      for (int j = 0; j < D; ++j) {
        S[i * D + j] = std::fma(kt[i], delta[j], S[i * D + j]);
        ot[j] = std::fma(S[i * D + j], qt[i], ot[j]);
      }
  }
}

TEST_CASE("the KDA head in blocks of columns has the bits of the unblocked order on every level",
          "[engine][ops][kda]") {
  Rng rng(6);
  const int T = 5;
  for (int D : {16, 32, 40, 128}) {  // less than a block, one, one and a part, K3's four
    auto q = random_vec(T * D, rng), k = random_vec(T * D, rng), v = random_vec(T * D, rng);
    std::vector<float> alpha(T * D), beta(T), S0 = random_vec(D * D, rng);
    for (auto& a : alpha) a = 0.5f + 0.5f * std::fabs(rng.uniform());
    for (auto& b : beta) b = std::fabs(rng.uniform());
    std::vector<float> ref_S = S0, ref_o(T * D);
    kda_unblocked(T, D, q.data(), k.data(), v.data(), alpha.data(), beta.data(), ref_S.data(), ref_o.data());
    for (SimdLevel level : levels()) {
      INFO("D " << D << ", " << simd_level_name(level));
      std::vector<float> Sl = S0, o(T * D), u(D), delta(D);
      kernel_table(level).kda_head(T, D, q.data(), k.data(), v.data(), alpha.data(), beta.data(), D,
                                   1, Sl.data(), o.data(), u.data(), delta.data());
      for (int i = 0; i < T * D; ++i) REQUIRE(bits(o[i]) == bits(ref_o[i]));
      for (int i = 0; i < D * D; ++i) REQUIRE(bits(Sl[i]) == bits(ref_S[i]));
    }
  }
}

TEST_CASE("rmsnorm, l2norm, softmax and SiTU match their formulas", "[engine][ops]") {
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 0.5f, 2, 1}, y(4);
  rmsnorm(x.data(), w.data(), 4, 1e-5f, y.data());
  const double inv = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-5);
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(w[i] * x[i] * inv).epsilon(1e-6));
  std::vector<float> z = {3, 4};
  l2norm(z.data(), 2, 1e-6f);
  CHECK(z[0] == Approx(0.6).epsilon(1e-6));
  std::vector<float> s = {1, 2, 3};
  softmax_inplace(s.data(), 3);
  CHECK(s[0] + s[1] + s[2] == Approx(1.0));
  CHECK(s[2] == Approx(std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  float g = 2.0f, u = 30.0f, out;
  situ_glu(&g, &u, 1, 4.0f, 25.0f, &out);
  const double a = 4 * std::tanh(0.5) / (1 + std::exp(-2.0)), b = 25 * std::tanh(30.0 / 25);
  CHECK(out == Approx(a * b).epsilon(1e-6));
}

}  // namespace
}  // namespace nj::ops
