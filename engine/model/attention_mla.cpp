// Gated MLA (k3-model.md §5) in the absorbed form, over a chunk of T tokens. Prefill and
// decode share this code, so a token's output does not depend on how it was batched.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/model/layers.h"
#include "engine/ops/kernels.h"

namespace nj {
namespace {
enum Buf : size_t { kQa, kQ, kCkv, kO, kGate, kPerHead };
}  // namespace

void mla_forward(const ModelConfig& c, const MlaWeights& w, LayerState& st, const float* x, int T,
                 float* out, Scratch& s) {
  const int nh = c.heads, nope = c.qk_nope, rope = c.qk_rope, vd = c.v_head_dim, kvl = c.kv_lora_rank;
  const int qw = nope + rope, hid = c.hidden;
  const size_t hs = static_cast<size_t>(hid), qrow = static_cast<size_t>(nh * qw);
  // q = q_b( RMSNorm(q_a x) )   [T][heads][nope + rope]
  float* qa = s.get(kQa, static_cast<size_t>(T) * static_cast<size_t>(c.q_lora_rank));
  float* q = s.get(kQ, static_cast<size_t>(T) * qrow);
  ops::matmul(w.q_a_proj, x, T, hs, qa, static_cast<size_t>(c.q_lora_rank));
  for (int t = 0; t < T; ++t) {
    float* r = qa + static_cast<size_t>(t) * static_cast<size_t>(c.q_lora_rank);
    ops::rmsnorm(r, w.q_a_norm, c.q_lora_rank, c.rms_eps, r);
  }
  ops::matmul(w.q_b_proj, qa, T, static_cast<size_t>(c.q_lora_rank), q, qrow);
  // c = kv_a x;  L = RMSNorm(c[:kvl]);  kr = c[kvl:]  → appended to the cache
  const size_t crow = static_cast<size_t>(kvl + rope);
  float* ckv = s.get(kCkv, static_cast<size_t>(T) * crow);
  ops::matmul(w.kv_a_proj, x, T, hs, ckv, crow);
  const size_t p0 = static_cast<size_t>(st.latent.size() / static_cast<size_t>(kvl));
  st.latent.resize((p0 + static_cast<size_t>(T)) * static_cast<size_t>(kvl));
  st.rope.resize((p0 + static_cast<size_t>(T)) * static_cast<size_t>(rope));
  for (int t = 0; t < T; ++t) {
    const float* ct = ckv + static_cast<size_t>(t) * crow;
    ops::rmsnorm(ct, w.kv_a_norm, kvl, c.rms_eps, &st.latent[(p0 + static_cast<size_t>(t)) * static_cast<size_t>(kvl)]);
    std::copy_n(ct + kvl, rope, &st.rope[(p0 + static_cast<size_t>(t)) * static_cast<size_t>(rope)]);
  }

  // Per head, per token: q_abs = Wkb_hᵀ q_nope; scores over positions s <= t; o_h = Wvb_h Σ p_s L_s.
  const size_t orow = static_cast<size_t>(nh * vd);
  float* o = s.get(kO, static_cast<size_t>(T) * orow);
  const size_t n_max = p0 + static_cast<size_t>(T);
  const size_t per_head = 2 * static_cast<size_t>(kvl) + n_max;
  float* scratch = s.get(kPerHead, static_cast<size_t>(nh) * per_head);
  const float scale = 1.0f / std::sqrt(static_cast<float>(qw));
  const ops::KernelTable& kt = ops::kernels();
  const float* latent = st.latent.data();
  const float* kr = st.rope.data();
#pragma omp parallel for schedule(static) if (nh > 1 && n_max * static_cast<size_t>(T) * static_cast<size_t>(kvl) > 16384)
  for (int h = 0; h < nh; ++h) {
    float* q_abs = scratch + static_cast<size_t>(h) * per_head;
    float* ctx = q_abs + kvl;
    float* score = ctx + kvl;
    const MatRef wkb = w.kv_b_proj.row_slice(h * (nope + vd), nope);
    const MatRef wvb = w.kv_b_proj.row_slice(h * (nope + vd) + nope, vd);
    for (int t = 0; t < T; ++t) {
      const float* qn = q + static_cast<size_t>(t) * qrow + static_cast<size_t>(h * qw);
      const float* qr = qn + nope;
      kt.matvec_t(wkb, qn, q_abs);
      const size_t n = p0 + static_cast<size_t>(t) + 1;  // causal: positions 0..p0+t
      for (size_t p = 0; p < n; ++p) {
        const float sl = kt.dot(q_abs, latent + p * static_cast<size_t>(kvl), kvl);
        const float sr = kt.dot(qr, kr + p * static_cast<size_t>(rope), rope);
        score[p] = (sl + sr) * scale;
      }
      ops::softmax_inplace(score, static_cast<int>(n));
      for (int i = 0; i < kvl; ++i) ctx[i] = 0.0f;
      for (size_t p = 0; p < n; ++p) kt.axpy(score[p], latent + p * static_cast<size_t>(kvl), ctx, kvl);
      ops::matmul_serial(wvb, ctx, 1, static_cast<size_t>(kvl),
                         o + static_cast<size_t>(t) * orow + static_cast<size_t>(h * vd), static_cast<size_t>(vd));
    }
  }
  // o ⊙ σ(g_proj x) before o_proj (no norm)
  if (c.mla_output_gate) {
    float* gate = s.get(kGate, static_cast<size_t>(T) * orow);
    ops::matmul(w.g_proj, x, T, hs, gate, orow);
    for (size_t i = 0; i < static_cast<size_t>(T) * orow; ++i) o[i] = o[i] * ops::sigmoid(gate[i]);
  }
  ops::matmul(w.o_proj, o, T, orow, out, hs);
}

}  // namespace nj
