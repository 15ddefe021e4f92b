// The kernel probe (see kernel_rates.h).
#include "engine/plan/kernel_rates.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <omp.h>

#include "engine/io/file.h"
#include "engine/model/config.h"
#include "engine/moe/expert_group.h"
#include "engine/moe/router.h"
#include "engine/ops/kernels.h"

namespace nj {
namespace {

// Larger than a core complex's L3 here (64 MiB of BF16, 34 MiB of MXFP4), as a streamed or
// pinned weight is when a pass reaches it.
constexpr int kRowsBf16 = 4096, kColsBf16 = 8192;
constexpr int kRowsMxfp4 = 8192, kColsMxfp4 = 8192;

struct ProbeMatrix {
  std::vector<uint8_t> data, scales;
  ops::MatRef ref;
};

// Weights of no particular meaning, quickly: a 64-bit generator, 8 bytes per step. BF16
// elements get exponents near 1 (never NaN or infinite); MXFP4 scale codes 120..127.
void fill_weights(uint8_t* bytes, size_t n, bool mxfp4, uint64_t seed) {
  uint64_t state = seed | 1;
  const uint64_t mask = mxfp4 ? ~0ull : 0x807F807F807F807Full;
  const uint64_t bits = mxfp4 ? 0 : 0x3C003C003C003C00ull;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const uint64_t v = (state & mask) | bits;
    std::memcpy(bytes + i, &v, 8);
  }
}

// MXFP4 scale codes into 120..127 (E8M0 factors near 1), from whatever bytes they hold.
void tame_scales(uint8_t* codes, size_t n) {
  for (size_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(120 + (codes[i] & 7));
}

ProbeMatrix make_matrix(ops::MatFormat format, int rows, int cols) {
  ProbeMatrix m;
  const bool mxfp4 = format == ops::MatFormat::kMxfp4;
  m.data.resize(static_cast<size_t>(rows) * cols * (mxfp4 ? 1 : 4) / 2);
  fill_weights(m.data.data(), m.data.size(), mxfp4, 0x9E3779B97F4A7C15ull);
  if (mxfp4) {
    m.scales.resize(static_cast<size_t>(rows) * cols / 32);
    fill_weights(m.scales.data(), m.scales.size(), true, 0x2545F4914F6CDD1Dull);
    tame_scales(m.scales.data(), m.scales.size());
  }
  m.ref.format = format;
  m.ref.rows = rows;
  m.ref.cols = cols;
  m.ref.data = m.data.data();
  m.ref.scales = m.scales.empty() ? nullptr : m.scales.data();
  return m;
}

// Seconds of the fastest of `repeats` products with `rows` token rows, after one untimed call.
double time_product(const ops::MatRef& w, int rows, int repeats, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * w.cols), y(static_cast<size_t>(rows) * w.rows);
  for (float& v : x) v = value(rng);
  const auto xs = static_cast<size_t>(w.cols), ys = static_cast<size_t>(w.rows);
  ops::matmul(w, x.data(), rows, xs, y.data(), ys);
  std::vector<double> times;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ops::matmul(w, x.data(), rows, xs, y.data(), ys);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // The fastest call: other processes only ever slow a call down.
  return *std::min_element(times.begin(), times.end());
}

// Seconds per element of `fn` (which does `elements` of work per call): the fastest of
// `repeats` runs, each calling it until ~2 ms have passed, after one untimed call.
template <class F>
double time_per_element(F&& fn, double elements, int repeats) {
  using Clock = std::chrono::steady_clock;
  fn();
  double best = 0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    int calls = 0;
    const auto t0 = Clock::now();
    double s = 0;
    do {
      fn();
      ++calls;
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (s < 2e-3);
    const double per = s / (calls * elements);
    best = r == 0 ? per : std::min(best, per);
  }
  return best;
}

// The element probes of KernelRates::ElementRates, on the calling thread.
KernelRates::ElementRates measure_elements(int repeats, std::mt19937& rng) {
  KernelRates::ElementRates e;
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  auto vec = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = value(rng);
    return v;
  };
  const ops::KernelTable& kt = ops::kernels();
  constexpr int n = 4096;  // 16 KiB per vector: in L1/L2 as a row's activations are
  std::vector<float> a = vec(n), b = vec(n), y(n), w = vec(n);
  e.situ = time_per_element([&] { ops::situ_glu(a.data(), b.data(), n, 4.0f, 25.0f, y.data()); }, n,
                            repeats);
  e.sigmoid = time_per_element(
      [&] {
        std::copy_n(a.data(), n, y.data());
        ops::sigmoid_inplace(y.data(), n);
      },
      n, repeats);
  e.exp = time_per_element(
      [&] {
        std::copy_n(a.data(), n, y.data());
        ops::exp_inplace(y.data(), n);
      },
      n, repeats);
  e.norm =
      time_per_element([&] { ops::rmsnorm(a.data(), w.data(), n, 1e-5f, y.data()); }, n, repeats);
  e.axpy = time_per_element([&] { ops::axpy(0.5f, a.data(), y.data(), n); }, n, repeats);
  volatile float sink = 0;
  e.dot = time_per_element([&] { sink = sink + kt.dot(a.data(), b.data(), n); }, n, repeats);

  // A small BF16 matrix (MLA's per-head kv_b slices are of this order): 128 x 256.
  {
    constexpr int rows = 128, cols = 256;
    std::vector<uint16_t> m(static_cast<size_t>(rows) * cols);
    for (uint16_t& x : m) x = static_cast<uint16_t>(0x3C00u | (rng() & 0x807Fu));
    ops::MatRef ref;
    ref.format = ops::MatFormat::kBF16;
    ref.rows = rows;
    ref.cols = cols;
    ref.data = reinterpret_cast<const uint8_t*>(m.data());
    e.matvec = time_per_element([&] { kt.matvec_t(ref, a.data(), y.data()); },
                                static_cast<double>(rows) * cols, repeats);
  }
  // One KDA head of D = 128 over 16 rows (q and k unit-normed, decays in (0, 1)).
  {
    constexpr int D = 128, T = 16;
    std::vector<float> q = vec(static_cast<size_t>(T) * D), k = vec(static_cast<size_t>(T) * D),
                       v = vec(static_cast<size_t>(T) * D), alpha(static_cast<size_t>(T) * D, 0.9f),
                       beta(T, 0.5f), S(static_cast<size_t>(D) * D, 0.0f),
                       o(static_cast<size_t>(T) * D), u(D), delta(D);
    for (int t = 0; t < T; ++t) {
      ops::l2norm(q.data() + static_cast<size_t>(t) * D, D, 1e-6f);
      ops::l2norm(k.data() + static_cast<size_t>(t) * D, D, 1e-6f);
    }
    e.kda = time_per_element(
        [&] {
          kt.kda_head(T, D, q.data(), k.data(), v.data(), alpha.data(), beta.data(), D, 1, S.data(),
                      o.data(), u.data(), delta.data());
        },
        static_cast<double>(T) * D * D, repeats);
  }
  {
    constexpr int E = 256, k = 8;
    std::vector<float> scores = vec(E), bias = vec(E), weights(k);
    ops::sigmoid_inplace(scores.data(), E);
    std::vector<int> selected(k);
    e.top_k = time_per_element(
        [&] {
          route_top_k(scores.data(), bias.data(), E, k, true, 1.0f, selected.data(),
                      weights.data());
        },
        E, repeats);
  }
  return e;
}

// The value of a probed ladder (ladder[i] at rungs[i] rows) at `rows` > 0: linear between
// rungs; a fraction of the first rung costs the whole rung; past the last rung the work runs
// at that rung's throughput, so the value grows with the rows.
template <size_t N>
double on_ladder(const std::array<int, N>& rungs, const std::array<double, N>& ladder,
                 double rows) {
  if (rows >= rungs[N - 1]) return ladder[N - 1] * rows / rungs[N - 1];
  if (rows <= rungs[0]) return ladder[0];
  size_t hi = 1;
  while (rows > rungs[hi]) ++hi;
  const double r0 = rungs[hi - 1], r1 = rungs[hi];
  return ladder[hi - 1] + (ladder[hi] - ladder[hi - 1]) * (rows - r0) / (r1 - r0);
}

// Above the caches here: the experts a probe cycles through (a streamed pass reads each
// from memory the disk wrote it to).
constexpr size_t kExpertProbeBytes = 96u << 20;

}  // namespace

double KernelRates::ExpertRates::seconds(bool grouped_experts, double rows) const {
  if (rows <= 0) return 0;
  return on_ladder(kExpertRows, grouped_experts ? grouped : alone, rows);
}

void KernelRates::measure_experts(const ModelConfig& c, int repeats) {
  experts = ExpertRates{};
  if (c.num_experts <= 0 || c.latent <= 0 || c.moe_inter <= 0) return;
  const bool mxfp4 = c.mxfp4_experts;
  const int lat = c.latent, mi = c.moe_inter;
  // One expert's three matrices back to back: W1 and W3 [mi][lat], W2 [lat][mi].
  const size_t elements = static_cast<size_t>(lat) * mi;
  const size_t data = mxfp4 ? elements / 2 : elements * 2, scales = mxfp4 ? elements / 32 : 0;
  const size_t per_matrix = data + scales, per_expert = 3 * per_matrix;
  const int count = static_cast<int>(std::clamp<size_t>(kExpertProbeBytes / per_expert, 2, 256));
  // One buffer on huge pages, as the engine holds its experts (expert cache slabs, the
  // resident source's layers).
  AlignedBuffer bytes(per_expert * static_cast<size_t>(count), PageSize::kHuge);
  fill_weights(bytes.data(), bytes.size(), mxfp4, 0x9E3779B97F4A7C15ull);
  if (mxfp4)
    for (int e = 0; e < count; ++e)
      for (int m = 0; m < 3; ++m)
        tame_scales(bytes.data() + static_cast<size_t>(e) * per_expert + m * per_matrix + data,
                    scales);
  std::vector<ExpertWeights> w(static_cast<size_t>(count));
  for (int e = 0; e < count; ++e) {
    MatRef* m[3] = {&w[static_cast<size_t>(e)].w1, &w[static_cast<size_t>(e)].w3,
                    &w[static_cast<size_t>(e)].w2};
    for (int j = 0; j < 3; ++j) {
      const uint8_t* at = bytes.data() + static_cast<size_t>(e) * per_expert + j * per_matrix;
      m[j]->format = mxfp4 ? ops::MatFormat::kMxfp4 : ops::MatFormat::kBF16;
      m[j]->rows = j == 2 ? lat : mi;
      m[j]->cols = j == 2 ? mi : lat;
      m[j]->data = at;
      m[j]->scales = mxfp4 ? at + data : nullptr;
    }
  }
  const int max_rows = kExpertRows.back();
  // A full group at the top rung holds at most this many rows (the probe's time).
  const int group_rows = std::max(max_rows * 2, 512);
  std::mt19937 rng(20261202);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> z(static_cast<size_t>(group_rows) * lat);
  for (float& v : z) v = value(rng);
  std::vector<float> g(static_cast<size_t>(group_rows) * mi), u(g.size()), y(z.size());
  // As moe_forward: the thread team only when the group's work is worth its wake-up.
  auto team = [&](int rows) {
    return static_cast<double>(rows) * mi * lat * 3 < 524288.0 ? 1 : omp_get_max_threads();
  };
  int next = 0;  // the experts are taken in turn, so each call reads its weights from memory
  for (size_t i = 0; i < kExpertRows.size(); ++i) {
    const int rows = kExpertRows[i];
    // Alone: one expert per group, a region each.
    experts.alone[i] = time_per_element(
        [&] {
          const GroupExpert one{&w[static_cast<size_t>(next)], 0, rows};
          next = (next + 1) % count;
          run_expert_group(c, std::span<const GroupExpert>(&one, 1), z.data(), g.data(), u.data(),
                           y.data(), team(rows));
        },
        1.0, repeats);
    // Grouped: as many experts as the rows allow (at least 2) in one region.
    const int n = std::clamp(group_rows / rows, 2, count);
    std::vector<GroupExpert> group;
    for (int e = 0; e < n; ++e)
      group.push_back({&w[static_cast<size_t>((next + e) % count)], e * rows, rows});
    experts.grouped[i] = time_per_element(
        [&] {
          for (GroupExpert& ge : group) {
            ge.w = &w[static_cast<size_t>(next)];
            next = (next + 1) % count;
          }
          run_expert_group(c, group, z.data(), g.data(), u.data(), y.data(), team(n * rows));
        },
        n, repeats);
  }
  // Time never falls as rows grow.
  for (auto* ladder : {&experts.alone, &experts.grouped})
    for (size_t i = 1; i < ladder->size(); ++i)
      (*ladder)[i] = std::max((*ladder)[i], (*ladder)[i - 1]);
  experts.latent = lat;
  experts.moe_inter = mi;
  experts.mxfp4 = mxfp4;
}

KernelRates KernelRates::measure(int repeats) {
  KernelRates k;
  std::mt19937 rng(20261201);
  const ProbeMatrix bf16 = make_matrix(ops::MatFormat::kBF16, kRowsBf16, kColsBf16);
  const ProbeMatrix mxfp4 = make_matrix(ops::MatFormat::kMxfp4, kRowsMxfp4, kColsMxfp4);
  for (const ProbeMatrix* m : {&bf16, &mxfp4}) {
    const double elements = static_cast<double>(m->ref.rows) * m->ref.cols;
    for (size_t i = 0; i < kRows.size(); ++i)
      k.per_element[index(m->ref.format)][i] =
          time_product(m->ref, kRows[i], repeats, rng) / elements;
  }
  // Time never falls as rows grow (a noisy rung would otherwise make more rows cheaper).
  for (auto& ladder : k.per_element)
    for (size_t i = 1; i < ladder.size(); ++i) ladder[i] = std::max(ladder[i], ladder[i - 1]);
  k.element = measure_elements(repeats, rng);
  k.threads = omp_get_max_threads();
  return k;
}

double KernelRates::seconds(ops::MatFormat format, double elements, double rows) const {
  if (rows <= 0 || elements <= 0) return 0;
  return on_ladder(kRows, per_element[index(format)], rows) * elements;
}

double KernelRates::gflops(ops::MatFormat format, double rows) const {
  const double s = seconds(format, 1e9, rows);
  return s > 0 ? 2.0 * rows * 1e9 / s / 1e9 : 0.0;
}

nlohmann::json KernelRates::to_json() const {
  nlohmann::json j;
  for (ops::MatFormat f : {ops::MatFormat::kBF16, ops::MatFormat::kMxfp4}) {
    nlohmann::json ladder;
    for (int r : kRows) ladder[std::to_string(r)] = gflops(f, r);
    j[f == ops::MatFormat::kMxfp4 ? "mxfp4_gflops" : "bf16_gflops"] = ladder;
  }
  j["element_ns"] = {{"situ", element.situ * 1e9},     {"sigmoid", element.sigmoid * 1e9},
                     {"exp", element.exp * 1e9},       {"norm", element.norm * 1e9},
                     {"axpy", element.axpy * 1e9},     {"dot", element.dot * 1e9},
                     {"matvec", element.matvec * 1e9}, {"kda", element.kda * 1e9},
                     {"top_k", element.top_k * 1e9}};
  j["threads"] = threads;
  if (experts.measured()) {
    nlohmann::json alone, grouped;
    for (size_t i = 0; i < kExpertRows.size(); ++i) {
      alone[std::to_string(kExpertRows[i])] = experts.alone[i] * 1e6;
      grouped[std::to_string(kExpertRows[i])] = experts.grouped[i] * 1e6;
    }
    j["expert_us"] = {{"latent", experts.latent},
                      {"moe_inter", experts.moe_inter},
                      {"format", experts.mxfp4 ? "mxfp4" : "bf16"},
                      {"alone", alone},
                      {"grouped", grouped}};
  }
  return j;
}

}  // namespace nj
