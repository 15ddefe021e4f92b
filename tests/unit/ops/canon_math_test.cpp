// The engine's own elementwise math (engine/ops/kernels_math.inc) and the short conv: every
// SIMD level gives the scalar reference's bits wherever an element falls (a whole register or
// the tail), the results are within a few ulp of the exact formulas, and non-finite inputs
// behave.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/ops/kernels.h"
#include "tests/unit/ops/simd_levels.h"

namespace nj::ops {
namespace {

constexpr float kBeta = 4.0f, kLin = 25.0f;  // K3's situ_beta and situ_linear_beta

using testing::bits;
using testing::levels;

double exact(double g, double u) {
  return kBeta * std::tanh(g / kBeta) / (1.0 + std::exp(-g)) * (kLin * std::tanh(u / kLin));
}

// Values across every branch: zeros, tiny and huge magnitudes, both sides of tanh's switch
// (|z| = 0.55 at g = 2.2 and u = 13.75) and of exp's clamps, and pseudo-random ones.
std::vector<float> inputs() {
  std::vector<float> v = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -3e-6f, 0.01f, -0.3f};
  for (float x : {1.0f, 2.19999f, 2.2f, 2.20001f, 13.7499f, 13.75f, 20.0f, 87.0f, 87.3f, 88.3f,
                  88.4f, 176.7f, 353.0f, 1e4f, 3e38f}) {
    v.push_back(x);
    v.push_back(-x);
  }
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 4000; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double unit = static_cast<double>(s >> 11) / static_cast<double>(1ull << 53);
    const double mag = std::pow(10.0, 6.0 * unit - 4.0);  // 1e-4 .. 1e2
    v.push_back(static_cast<float>((s & 1) ? mag : -mag));
  }
  return v;
}

TEST_CASE("SiTU-GLU gives the scalar reference's bits on every SIMD level", "[engine][ops]") {
  const std::vector<float> g = inputs();
  std::vector<float> u(g.rbegin(), g.rend());
  const int n = static_cast<int>(g.size());
  std::vector<float> ref(g.size());
  kernel_table(SimdLevel::kScalar).situ_glu(g.data(), u.data(), n, kBeta, kLin, ref.data());
  for (SimdLevel level : levels()) {
    // Every offset and a few lengths, so that each element is in a register and in a tail.
    for (int off = 0; off < 17; ++off)
      for (int len : {n - off, 1, 7, 15, 16, 17, 33}) {
        std::vector<float> y(static_cast<size_t>(len));
        kernel_table(level).situ_glu(g.data() + off, u.data() + off, len, kBeta, kLin, y.data());
        for (int i = 0; i < len; ++i) {
          INFO(simd_level_name(level) << " offset " << off << " element " << i << " g "
                                      << g[off + i] << " u " << u[off + i]);
          REQUIRE(bits(y[i]) == bits(ref[off + i]));
        }
      }
  }
}

TEST_CASE("SiTU-GLU is within a few ulp of the exact formula", "[engine][ops]") {
  const std::vector<float> g = inputs();
  std::vector<float> u(g.rbegin(), g.rend());
  std::vector<float> y(g.size());
  situ_glu(g.data(), u.data(), static_cast<int>(g.size()), kBeta, kLin, y.data());
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double want = exact(g[i], u[i]);
    INFO("g " << g[i] << " u " << u[i] << " got " << y[i] << " want " << want);
    REQUIRE(std::isfinite(y[i]));
    // Relative error in units of float's epsilon, with an absolute floor of 1e-35 for results
    // that underflow (exp's clamp: sigmoid of g < -88.3 is ~4.5e-39, kernels_math.inc).
    const double err = std::abs(y[i] - want) / std::max(std::abs(want), 1e-30);
    if (std::abs(want) > 1e-30) worst = std::max(worst, err);
    CHECK(std::abs(y[i] - want) <= 8 * 0x1p-24 * std::abs(want) + 1e-35);
  }
  INFO("worst relative error " << worst / 0x1p-24 << " half-ulps of 1");
  CHECK(worst < 8 * 0x1p-24);
}

TEST_CASE("SiTU-GLU saturates on infinities and passes NaN through", "[engine][ops]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 16 + 3 elements: the special values in a register and in the tail on every level.
  std::vector<float> g(19, 1.0f), u(19, 1.0f);
  g[0] = inf, u[0] = inf;    // 4 · 1 · 1 · 25
  g[1] = -inf, u[1] = 1.0f;  // sigmoid(-inf) underflows: a zero of g's sign
  g[2] = nan;
  u[3] = nan;
  g[16] = inf, u[16] = -inf;
  g[17] = nan;
  u[18] = nan;
  for (SimdLevel level : levels()) {
    INFO(simd_level_name(level));
    std::vector<float> y(19);
    kernel_table(level).situ_glu(g.data(), u.data(), 19, kBeta, kLin, y.data());
    CHECK(y[0] == 100.0f);
    CHECK(y[1] <= 0.0f);
    CHECK(y[1] > -1e-36f);
    CHECK(std::isnan(y[2]));
    CHECK(std::isnan(y[3]));
    CHECK(y[16] == -100.0f);
    CHECK(std::isnan(y[17]));
    CHECK(std::isnan(y[18]));
  }
}

// Each elementwise kernel of a level against the scalar table, bit for bit, at every offset.
template <typename Run>
void same_bits_on_every_level(const std::vector<float>& a, const std::vector<float>& b, Run run) {
  const int n = static_cast<int>(a.size());
  std::vector<float> ref(a.size());
  run(kernel_table(SimdLevel::kScalar), a.data(), b.data(), n, ref.data());
  for (SimdLevel level : levels())
    for (int off = 0; off < 17; ++off) {
      std::vector<float> y(a.size());
      run(kernel_table(level), a.data() + off, b.data() + off, n - off, y.data());
      for (int i = 0; i < n - off; ++i) {
        INFO(simd_level_name(level) << " offset " << off << " x " << a[off + i]);
        REQUIRE(bits(y[i]) == bits(ref[off + i]));
      }
    }
}

TEST_CASE("sigmoid and the sigmoid gate give the scalar bits on every level, within ulps",
          "[engine][ops]") {
  const std::vector<float> x = inputs();
  const std::vector<float> g(x.rbegin(), x.rend());
  same_bits_on_every_level(x, g,
                           [](const KernelTable& k, const float* a, const float*, int n, float* y) {
                             k.sigmoid(a, n, y);
                           });
  same_bits_on_every_level(
      x, g, [](const KernelTable& k, const float* a, const float* b, int n, float* y) {
        k.sigmoid_gate(a, b, n, y);
      });
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    INFO("x " << v);
    const double s = 1.0 / (1.0 + std::exp(-v));
    float sig;
    kernels().sigmoid(&x[i], 1, &sig);
    CHECK(std::abs(sig - s) <= 4 * 0x1p-24 * s + 1e-35);
    float gated = x[i];
    sigmoid_gate(&gated, &g[i], 1);
    const double want_gate = v / (1.0 + std::exp(-static_cast<double>(g[i])));
    CHECK(std::abs(gated - want_gate) <= 6 * 0x1p-24 * std::abs(want_gate) + 1e-35);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float sig_nan;
  kernels().sigmoid(&nan, 1, &sig_nan);
  CHECK(std::isnan(sig_nan));
}

TEST_CASE("the short conv gives the scalar bits on every level and sums its taps in order",
          "[engine][ops]") {
  const std::vector<float> in = inputs();
  for (int P : {16, 37, 128, 200}) {  // within one block of channels, whole blocks, a part
    for (int K : {1, 4, 8}) {
      const int T = 5;
      std::vector<float> ext(static_cast<size_t>((T + K - 1) * P)),
          taps(static_cast<size_t>(P * K));
      for (size_t i = 0; i < ext.size(); ++i) ext[i] = in[i % in.size()] * 0.5f;
      for (size_t i = 0; i < taps.size(); ++i) taps[i] = in[(7 * i + 3) % in.size()] * 0.25f;
      std::vector<float> ref(static_cast<size_t>(T * P));
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < P; ++c) {
          float acc = 0.0f;
          for (int j = 0; j < K; ++j)
            acc = std::fma(taps[static_cast<size_t>(c * K + j)],
                           ext[static_cast<size_t>((t + j) * P + c)], acc);
          ref[static_cast<size_t>(t * P + c)] = acc;
        }
      for (SimdLevel level : levels()) {
        std::vector<float> out(ref.size());
        kernel_table(level).short_conv(ext.data(), taps.data(), T, P, K, out.data());
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO(simd_level_name(level) << " P " << P << " K " << K << " element " << i);
          REQUIRE(bits(out[i]) == bits(ref[i]));
        }
      }
    }
  }
}

}  // namespace
}  // namespace nj::ops
