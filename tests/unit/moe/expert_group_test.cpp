// Expert groups (engine/moe/expert_group.h): the static split covers every row of every
// expert's matrix exactly once, and a group computed in one parallel region gives the bits of
// each expert computed alone by the threaded matmul, for 1, 2 and 3 threads and every SIMD
// level.
#include "engine/moe/expert_group.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "engine/ops/cpu.h"
#include "engine/ops/kernels.h"

namespace nj {
namespace {

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

// A random [rows][cols] matrix: MXFP4 (scale codes 120..127, some zero blocks) or F32.
struct Matrix {
  ops::MatRef ref;
  std::vector<uint8_t> data, scales;
};

Matrix make_matrix(ops::MatFormat f, int rows, int cols, Rng& rng) {
  Matrix m;
  m.ref.format = f;
  m.ref.rows = rows;
  m.ref.cols = cols;
  m.data.resize(m.ref.row_bytes() * static_cast<size_t>(rows));
  if (f == ops::MatFormat::kMxfp4) {
    for (auto& b : m.data) b = static_cast<uint8_t>(rng.next());
    m.scales.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols / 32));
    for (auto& s : m.scales) {
      const uint64_t r = rng.next() % 9;
      s = r == 0 ? ops::kE8M0Zero : static_cast<uint8_t>(119 + r);
    }
    m.ref.scales = m.scales.data();
  } else {
    for (size_t i = 0; i < m.data.size(); i += 4) {
      const float v = rng.uniform();
      std::memcpy(&m.data[i], &v, 4);
    }
  }
  m.ref.data = m.data.data();
  return m;
}

struct Expert {
  Matrix w1, w2, w3;
  ExpertWeights w;
};

TEST_CASE("the static split of an expert group covers every row once, in contiguous runs",
          "[engine][moe]") {
  const std::vector<GroupExpert> group = {
      {nullptr, 0, 3}, {nullptr, 3, 1}, {nullptr, 4, 7}, {nullptr, 11, 2}, {nullptr, 13, 40}};
  for (int matrix_rows : {1, 15, 16, 100, 1024})
    for (int threads = 1; threads <= 4; ++threads) {
      const auto runs = split_group_rows(group, matrix_rows, threads);
      REQUIRE(runs.size() == static_cast<size_t>(threads));
      std::vector<std::vector<int>> covered(group.size(), std::vector<int>(matrix_rows, 0));
      int last_expert = -1, last_row = 0;
      for (const auto& mine : runs)
        for (const RowRun& r : mine) {
          REQUIRE(r.r0 < r.r1);
          // Runs go in (expert, row) order across the threads: each thread's share follows
          // the previous thread's.
          REQUIRE((r.expert > last_expert || (r.expert == last_expert && r.r0 >= last_row)));
          last_expert = r.expert;
          last_row = r.r1;
          for (int i = r.r0; i < r.r1; ++i)
            covered[static_cast<size_t>(r.expert)][static_cast<size_t>(i)]++;
        }
      for (const auto& e : covered)
        for (int c : e) REQUIRE(c == 1);
    }
}

TEST_CASE("an expert group in one parallel region equals each expert alone, for 1, 2 and 3 threads",
          "[engine][moe]") {
  // Small latent and intermediate widths with partial MXFP4 chunks (160 = one chunk and one
  // block, 96 = three blocks), experts of 1 to 9 token rows (the small-row kernels and the
  // tiles), and one F32 expert among MXFP4 ones.
  ModelConfig c;
  c.latent = 160;
  c.moe_inter = 96;
  Rng rng(29);
  const std::vector<int> rows = {1, 2, 3, 4, 5, 6, 7, 9, 1, 3};
  std::vector<Expert> experts(rows.size());
  for (size_t i = 0; i < experts.size(); ++i) {
    const ops::MatFormat f = i == 4 ? ops::MatFormat::kF32 : ops::MatFormat::kMxfp4;
    experts[i].w1 = make_matrix(f, c.moe_inter, c.latent, rng);
    experts[i].w3 = make_matrix(f, c.moe_inter, c.latent, rng);
    experts[i].w2 = make_matrix(f, c.latent, c.moe_inter, rng);
    experts[i].w = {experts[i].w1.ref, experts[i].w2.ref, experts[i].w3.ref};
  }
  std::vector<GroupExpert> group;
  int total = 0;
  for (size_t i = 0; i < experts.size(); ++i) {
    group.push_back({&experts[i].w, total, rows[i]});
    total += rows[i];
  }
  const size_t ls = static_cast<size_t>(c.latent), ms = static_cast<size_t>(c.moe_inter);
  std::vector<float> z(static_cast<size_t>(total) * ls);
  for (auto& v : z) v = rng.uniform();

  const SimdLevel before = active_simd_level();
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > detect_simd_level()) continue;
    REQUIRE(force_simd_level(level).ok());
    // Each expert alone, as the MoE computed them before groups: the threaded matmul.
    std::vector<float> ref(static_cast<size_t>(total) * ls);
    for (const GroupExpert& e : group) {
      std::vector<float> g(static_cast<size_t>(e.rows) * ms), u(g.size());
      const size_t f = static_cast<size_t>(e.first);
      ops::matmul(e.w->w1, &z[f * ls], e.rows, ls, g.data(), ms);
      ops::matmul(e.w->w3, &z[f * ls], e.rows, ls, u.data(), ms);
      ops::situ_glu(g.data(), u.data(), e.rows * c.moe_inter, c.situ_beta, c.situ_linear_beta,
                    g.data());
      ops::matmul(e.w->w2, g.data(), e.rows, ms, &ref[f * ls], ls);
    }
    for (int threads : {1, 2, 3}) {
      std::vector<float> g(static_cast<size_t>(total) * ms, -1.0f), u(g.size(), -1.0f);
      std::vector<float> y(ref.size(), -1.0f);
      run_expert_group(c, group, z.data(), g.data(), u.data(), y.data(), threads);
      INFO("level " << simd_level_name(level) << ", " << threads << " threads");
      REQUIRE(std::memcmp(y.data(), ref.data(), y.size() * sizeof(float)) == 0);
    }
  }
  REQUIRE(force_simd_level(before).ok());
}

}  // namespace
}  // namespace nj
