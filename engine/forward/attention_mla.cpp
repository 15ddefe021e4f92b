// Gated MLA (k3-model.md §5) in the absorbed form, over the rows of a pass: projections for
// all rows at once, each sequence's latent cache and attention on its own rows. Prefill and
// decode share this code, so a token's output does not depend on how it was batched.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj {

void mla_forward(const ModelConfig& c, const MlaWeights& w, std::span<const SeqRows> seqs, const float* x,
                 int rows, float* out, MlaActivations& a) {
  const int nh = c.heads, nope = c.qk_nope, rope = c.qk_rope, vd = c.v_head_dim, kvl = c.kv_lora_rank;
  const int qw = nope + rope, hid = c.hidden;
  const size_t hs = static_cast<size_t>(hid), qrow = static_cast<size_t>(nh * qw);
  const size_t kv = static_cast<size_t>(kvl), rp = static_cast<size_t>(rope);
  // q = q_b( RMSNorm(q_a x) )   [rows][heads][nope + rope]
  float* qa = a.qa.data();
  float* q = a.q.data();
  ops::matmul(w.q_a_proj, x, rows, hs, qa, static_cast<size_t>(c.q_lora_rank));
  for (int t = 0; t < rows; ++t) {
    float* r = qa + static_cast<size_t>(t) * static_cast<size_t>(c.q_lora_rank);
    ops::rmsnorm(r, w.q_a_norm, c.q_lora_rank, c.rms_eps, r);
  }
  ops::matmul(w.q_b_proj, qa, rows, static_cast<size_t>(c.q_lora_rank), q, qrow);
  // c = kv_a x;  L = RMSNorm(c[:kvl]);  kr = c[kvl:]
  const size_t crow = kv + rp;
  float* ckv = a.ckv.data();
  ops::matmul(w.kv_a_proj, x, rows, hs, ckv, crow);

  const size_t orow = static_cast<size_t>(nh * vd);
  float* o = a.o.data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(qw));
  const ops::KernelTable& kt = ops::kernels();
  for (const SeqRows& s : seqs) {
    // Append this sequence's latents to its cache.
    LayerState& st = *s.state;
    const size_t p0 = st.latent.size() / kv, T = static_cast<size_t>(s.rows);
    st.latent.resize((p0 + T) * kv);
    st.rope.resize((p0 + T) * rp);
    for (size_t t = 0; t < T; ++t) {
      const float* ct = ckv + (static_cast<size_t>(s.row0) + t) * crow;
      ops::rmsnorm(ct, w.kv_a_norm, kvl, c.rms_eps, &st.latent[(p0 + t) * kv]);
      std::copy_n(ct + kvl, rope, &st.rope[(p0 + t) * rp]);
    }
    // Per head, per token: q_abs = Wkb_hᵀ q_nope; scores over positions <= its own;
    // o_h = Wvb_h Σ p_s L_s.
    const size_t n_max = p0 + T;
    const size_t per_head = 2 * kv + n_max;
    NJ_CHECK_MSG(a.per_head.size() >= static_cast<size_t>(nh) * per_head, "MLA scratch sized for a shorter context");
    const float* latent = st.latent.data();
    const float* kr = st.rope.data();
#pragma omp parallel for schedule(static) if (nh > 1 && n_max * T * kv > 16384)
    for (int h = 0; h < nh; ++h) {
      float* q_abs = a.per_head.data() + static_cast<size_t>(h) * per_head;
      float* ctx = q_abs + kvl;
      float* score = ctx + kvl;
      const MatRef wkb = w.kv_b_proj.row_slice(h * (nope + vd), nope);
      const MatRef wvb = w.kv_b_proj.row_slice(h * (nope + vd) + nope, vd);
      for (size_t t = 0; t < T; ++t) {
        const size_t row = static_cast<size_t>(s.row0) + t;
        const float* qn = q + row * qrow + static_cast<size_t>(h * qw);
        const float* qr = qn + nope;
        kt.matvec_t(wkb, qn, q_abs);
        const size_t n = p0 + t + 1;  // causal: positions 0..p0+t
        for (size_t p = 0; p < n; ++p) {
          const float sl = kt.dot(q_abs, latent + p * kv, kvl);
          const float sr = kt.dot(qr, kr + p * rp, rope);
          score[p] = (sl + sr) * scale;
        }
        ops::softmax_inplace(score, static_cast<int>(n));
        for (int i = 0; i < kvl; ++i) ctx[i] = 0.0f;
        for (size_t p = 0; p < n; ++p) kt.axpy(score[p], latent + p * kv, ctx, kvl);
        ops::matmul_serial(wvb, ctx, 1, kv, o + row * orow + static_cast<size_t>(h * vd), static_cast<size_t>(vd));
      }
    }
  }
  // o ⊙ σ(g_proj x) before o_proj (no norm)
  if (c.mla_output_gate) {
    float* gate = a.gate.data();
    ops::matmul(w.g_proj, x, rows, hs, gate, orow);
    ops::sigmoid_gate(o, gate, static_cast<int>(static_cast<size_t>(rows) * orow));
  }
  ops::matmul(w.o_proj, o, rows, orow, out, hs);
}

void mla_keep(const ModelConfig& c, LayerState& st, int64_t positions) {
  const size_t n = static_cast<size_t>(positions);
  NJ_CHECK_MSG(n * static_cast<size_t>(c.kv_lora_rank) <= st.latent.size(),
               "mla_keep: more positions than cached");
  st.latent.resize(n * static_cast<size_t>(c.kv_lora_rank));
  st.rope.resize(n * static_cast<size_t>(c.qk_rope));
}

}  // namespace nj
