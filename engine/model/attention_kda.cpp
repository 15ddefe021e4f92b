// KDA, Kimi Delta Attention (k3-model.md §4), over a chunk of T tokens.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/model/layers.h"
#include "engine/ops/kernels.h"

namespace nj {
namespace {

enum Buf : size_t { kQ, kK, kV, kConvIn, kBeta, kZa, kAlpha, kO, kGate, kExt, kUd };

// Causal depthwise conv + SiLU for one of q/k/v. raw: [T][P] this chunk's pre-conv inputs;
// hist: [K-1][3][P] (oldest first), `which` selects q/k/v. Writes out [T][P] and rolls the
// history forward. ext is scratch [(K-1)+T][P].
void short_conv_silu(const float* raw, const float* taps, float* hist, int which, int T, int P, int K,
                     float* ext, float* out) {
  const size_t p = static_cast<size_t>(P);
  for (int r = 0; r < K - 1; ++r)
    std::copy_n(hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p, p, ext + static_cast<size_t>(r) * p);
  std::copy_n(raw, static_cast<size_t>(T) * p, ext + static_cast<size_t>(K - 1) * p);
  for (int t = 0; t < T; ++t) {
    float* o = out + static_cast<size_t>(t) * p;
    for (int c = 0; c < P; ++c) {
      const float* w = taps + static_cast<size_t>(c) * static_cast<size_t>(K);
      float acc = 0.0f;  // tap j multiplies input t-K+1+j; tap K-1 is the current token
      for (int j = 0; j < K; ++j) acc = std::fma(w[j], ext[static_cast<size_t>(t + j) * p + static_cast<size_t>(c)], acc);
      o[c] = acc;
    }
    ops::silu_inplace(o, P);
  }
  for (int r = 0; r < K - 1; ++r)
    std::copy_n(ext + static_cast<size_t>(T + r) * p, p, hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p);
}

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void kda_forward(const ModelConfig& c, const KdaWeights& w, LayerState& st, const float* x, int T,
                 float* out, Scratch& s) {
  const int H = c.kda_heads, D = c.kda_head_dim, P = c.kda_width(), K = c.conv_kernel, hid = c.hidden;
  const size_t TP = static_cast<size_t>(T) * static_cast<size_t>(P), hs = static_cast<size_t>(hid);
  float* q = s.get(kQ, TP);
  float* k = s.get(kK, TP);
  float* v = s.get(kV, TP);
  float* raw = s.get(kConvIn, TP);
  float* ext = s.get(kExt, static_cast<size_t>(T + K - 1) * static_cast<size_t>(P));

  // q, k, v = SiLU(conv(W x)), carrying the last K-1 inputs between chunks.
  const MatRef* proj[3] = {&w.q_proj, &w.k_proj, &w.v_proj};
  const float* taps[3] = {w.q_conv, w.k_conv, w.v_conv};
  float* dst[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    ops::matmul(*proj[i], x, T, hs, raw, static_cast<size_t>(P));
    short_conv_silu(raw, taps[i], st.conv.data(), i, T, P, K, ext, dst[i]);
  }
  // Per head: q, k ← x (Σx² + 1e-6)^-1/2; v is not normed.
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const size_t o = static_cast<size_t>(t) * static_cast<size_t>(P) + static_cast<size_t>(h * D);
      ops::l2norm(q + o, D, 1e-6f);
      ops::l2norm(k + o, D, 1e-6f);
    }
  // beta_h = σ(b_proj x)[h]
  float* beta = s.get(kBeta, static_cast<size_t>(T) * static_cast<size_t>(H));
  ops::matmul(w.b_proj, x, T, hs, beta, static_cast<size_t>(H));
  ops::sigmoid_inplace(beta, T * H);
  // z = f_b(f_a x) + dt_bias;  g = lb · σ(exp(A_log[h]) · z);  alpha = exp(g)
  float* za = s.get(kZa, static_cast<size_t>(T) * static_cast<size_t>(D));
  float* alpha = s.get(kAlpha, TP);
  ops::matmul(w.f_a_proj, x, T, hs, za, static_cast<size_t>(D));
  ops::matmul(w.f_b_proj, za, T, static_cast<size_t>(D), alpha, static_cast<size_t>(P));
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const float a = std::exp(w.a_log[h]);
      for (int d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>(h * D + d);
        float& z = alpha[static_cast<size_t>(t) * static_cast<size_t>(P) + i];
        z = z + w.dt_bias[i];
        const float g = c.has_gate_lower_bound ? c.gate_lower_bound * ops::sigmoid(a * z) : -a * softplus(z);
        z = std::exp(g);
      }
    }
  // q ← q · D^-1/2
  const float qscale = 1.0f / std::sqrt(static_cast<float>(D));
  for (size_t i = 0; i < TP; ++i) q[i] = q[i] * qscale;

  // The recurrence, one head per thread (heads never interact).
  float* o = s.get(kO, TP);
  float* ud = s.get(kUd, static_cast<size_t>(H) * 2 * static_cast<size_t>(D));
  const ops::KernelTable& kt = ops::kernels();
  const size_t DD = static_cast<size_t>(D) * static_cast<size_t>(D);
#pragma omp parallel for schedule(static) if (H > 1 && static_cast<size_t>(T) * DD * H > 32768)
  for (int h = 0; h < H; ++h) {
    const size_t off = static_cast<size_t>(h * D);
    float* u = ud + static_cast<size_t>(h) * 2 * static_cast<size_t>(D);
    kt.kda_head(T, D, q + off, k + off, v + off, alpha + off, beta + h, static_cast<size_t>(P),
                static_cast<size_t>(H), st.S.data() + static_cast<size_t>(h) * DD, o + off, u, u + D);
  }
  // o_h = RMSNorm(o_h, o_norm) per head; then o ⊙ σ(g_proj x); out = o_proj o
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      float* oh = o + static_cast<size_t>(t) * static_cast<size_t>(P) + static_cast<size_t>(h * D);
      ops::rmsnorm(oh, w.o_norm, D, c.rms_eps, oh);
    }
  float* gate = s.get(kGate, TP);
  ops::matmul(w.g_proj, x, T, hs, gate, static_cast<size_t>(P));
  for (size_t i = 0; i < TP; ++i) o[i] = o[i] * ops::sigmoid(gate[i]);
  ops::matmul(w.o_proj, o, T, static_cast<size_t>(P), out, hs);
}

}  // namespace nj
