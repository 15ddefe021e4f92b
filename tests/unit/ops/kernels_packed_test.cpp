// Products of many token rows through packed panels (kernels_packed.inc): every level, every
// token count from 1 to 600 that crosses a threshold, a micro-tile or a block, every row range
// and 1 or 2 threads give the bits of the scalar row-at-a-time reference, one pair at a time.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "engine/ops/kernels.h"
#include "tests/unit/ops/simd_levels.h"
#include "tests/unit/ops/test_matrix.h"

namespace nj::ops {
namespace {

using testing::arranged;
using testing::bits;
using testing::levels;
using testing::make_matrix;
using testing::random_vec;
using testing::Rng;
using testing::TestMatrix;

// Token counts: all of 1-40 (the row kernels, the tiles, the packed thresholds 4, 8 and 32 and
// the micro-tiles' widths 2, 3, 4, 6 and 8, whole and partial), then larger ones, odd and even,
// up to 600. Wide rows take fewer of them (the reference costs T·rows·cols).
std::vector<int> token_counts(bool wide) {
  std::vector<int> out;
  for (int t = 1; t <= 40; ++t)
    if (!wide || t <= 9 || t % 8 == 0 || t % 8 == 1 || t % 8 == 7) out.push_back(t);
  for (int t : {47, 64, 97, 129, 193, 256, 385, 513, 599, 600})
    if (!wide || t % 2 == 1) out.push_back(t);
  return out;
}

// Y[t][r] for r < rows, t < T from the scalar table one token row at a time: each pair through
// the row-at-a-time code (generic_row_dot), the definition of the canonical order.
std::vector<float> row_reference(const MatRef& W, const std::vector<float>& Xa, int T, size_t xs,
                                 size_t ys) {
  std::vector<float> ref(static_cast<size_t>(T) * ys, -1.0f);
  for (int t = 0; t < T; ++t)
    kernel_table(SimdLevel::kScalar)
        .matmul_rows(W, &Xa[static_cast<size_t>(t) * xs], 1, xs, &ref[static_cast<size_t>(t) * ys],
                     ys, 0, W.rows);
  return ref;
}

TEST_CASE("packed products equal the row-at-a-time reference for T = 1..600 on every level",
          "[engine][ops][packed]") {
  // 70 rows: a 64-row panel and a partial one whose last tile has stand-in rows (4 and 8 rows
  // per tile); column counts give odd K (a partial last chunk for every format), several
  // blocks of columns (512 dense elements, 4 MXFP4 chunks per block on AVX-512) and a single
  // partial chunk. Row ranges start and end inside tiles and panels.
  Rng rng(41);
  const int rows = 70;
  const std::vector<std::pair<int, int>> ranges = {{0, 70}, {1, 69}, {5, 6}, {3, 67}, {64, 70}};
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4}) {
    const std::vector<int> col_counts =
        f == MatFormat::kMxfp4 ? std::vector<int>{96, 160, 1312} : std::vector<int>{17, 1031};
    for (int cols : col_counts) {
      TestMatrix m = make_matrix(f, rows, cols, rng);
      for (int T : token_counts(cols > 1000)) {
        const size_t xs = static_cast<size_t>(cols) + 3, ys = rows + 2;
        auto X = random_vec(static_cast<size_t>(T) * xs, rng);
        std::vector<float> Xa(X.size());
        const std::vector<float> a = arranged(f, X, T, xs, cols);
        for (int t = 0; t < T; ++t)
          std::copy_n(&a[static_cast<size_t>(t) * cols], cols, &Xa[static_cast<size_t>(t) * xs]);
        const std::vector<float> ref = row_reference(m.ref, Xa, T, xs, ys);
        for (SimdLevel level : levels()) {
          // Every range for small T, one range (in turn) beside the full one for larger T.
          for (size_t i = 0; i < ranges.size(); ++i) {
            if (T > 40 && i != 0 && i != static_cast<size_t>(T) % ranges.size()) continue;
            const auto [r0, r1] = ranges[i];
            std::vector<float> y(ref.size(), -1.0f);
            kernel_table(level).matmul_rows(m.ref, Xa.data(), T, xs, y.data(), ys, r0, r1);
            INFO(mat_format_name(f) << " " << rows << "x" << cols << " T=" << T << " rows [" << r0
                                    << ", " << r1 << ") level " << simd_level_name(level));
            for (int t = 0; t < T; ++t)
              for (int r = 0; r < static_cast<int>(ys); ++r) {
                const size_t k = static_cast<size_t>(t) * ys + static_cast<size_t>(r);
                if (r < r0 || r >= r1)
                  REQUIRE(bits(y[k]) == bits(-1.0f));  // nothing outside the range is written
                else
                  REQUIRE(bits(y[k]) == bits(ref[k]));
              }
          }
        }
      }
    }
  }
}

TEST_CASE("packed products cross blocks of token rows on every level", "[engine][ops][packed]") {
  // The SIMD levels take 8 MB of activations per block of token rows: 520 token rows of 4128
  // columns (8.6 MB) make two blocks; 5 rows keep the reference cheap. 4128 columns are 129
  // BF16 chunks, 258 F32 and F16 chunks, 32 MXFP4 chunks and a partial one (129 blocks).
  Rng rng(47);
  const int rows = 5, cols = 4128, T = 520;
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4}) {
    TestMatrix m = make_matrix(f, rows, cols, rng);
    const size_t xs = cols, ys = rows;
    const std::vector<float> Xa =
        arranged(f, random_vec(static_cast<size_t>(T) * xs, rng), T, xs, cols);
    const std::vector<float> ref = row_reference(m.ref, Xa, T, xs, ys);
    for (SimdLevel level : levels()) {
      std::vector<float> y(ref.size(), -1.0f);
      kernel_table(level).matmul_rows(m.ref, Xa.data(), T, xs, y.data(), ys, 0, rows);
      INFO(mat_format_name(f) << " level " << simd_level_name(level));
      REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("threaded packed products give the reference bits with 1 and 2 threads on every level",
          "[engine][ops][packed]") {
  // ops::matmul arranges the activations, splits the rows over the threads (259 rows: the
  // threads' ranges end inside panels and tiles; one thread crosses two 128-row MXFP4 panels
  // of the SIMD levels) and reads and writes with wide strides.
  Rng rng(43);
  const int rows = 259;
  const SimdLevel before = active_simd_level();
  const int threads_before = omp_get_max_threads();
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4}) {
    const int cols = f == MatFormat::kMxfp4 ? 544 : 543;
    TestMatrix m = make_matrix(f, rows, cols, rng);
    for (int T : {8, 33, 97, 301}) {
      const size_t xs = static_cast<size_t>(cols) + 5, ys = rows + 3;
      auto X = random_vec(static_cast<size_t>(T) * xs, rng);
      std::vector<float> Xa(X.size());
      const std::vector<float> a = arranged(f, X, T, xs, cols);
      for (int t = 0; t < T; ++t)
        std::copy_n(&a[static_cast<size_t>(t) * cols], cols, &Xa[static_cast<size_t>(t) * xs]);
      const std::vector<float> ref = row_reference(m.ref, Xa, T, xs, ys);
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

TEST_CASE("a product's packed scratch stays within what the planner counts, on every level",
          "[engine][ops][packed]") {
  // Each product on a thread of its own (a fresh scratch): rows of 544 and 7168 columns, enough
  // rows for whole panels (MXFP4's 128), and rows of 65536 columns, where one tile of rows is
  // more than a dense panel's bytes.
  Rng rng(53);
  const int T = 40;
  for (MatFormat f : {MatFormat::kF32, MatFormat::kBF16, MatFormat::kF16, MatFormat::kMxfp4})
    for (const std::pair<int, int>& shape :
         {std::pair{130, 544}, std::pair{130, 7168}, std::pair{8, 65536}}) {
      const int rows = shape.first, cols = shape.second;  // (a lambda can't capture bindings)
      TestMatrix m = make_matrix(f, rows, cols, rng);
      const std::vector<float> Xa =
          arranged(f, random_vec(static_cast<size_t>(T) * cols, rng), T, cols, cols);
      std::vector<float> y(static_cast<size_t>(T) * rows);
      for (SimdLevel level : levels()) {
        size_t used = 0;
        std::thread([&] {
          kernel_table(level).matmul_rows(m.ref, Xa.data(), T, cols, y.data(), rows, 0, rows);
          used = scratch_bytes();
        }).join();
        INFO(mat_format_name(f) << " [" << rows << "][" << cols << "] level "
                                << simd_level_name(level));
        CHECK(used > 0);
        CHECK(used <= kernel_table(level).packed_scratch_bytes(cols, rows));
      }
    }
}

}  // namespace
}  // namespace nj::ops
