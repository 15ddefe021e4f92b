// KDA, Kimi Delta Attention (k3-model.md §4), over the rows of a pass: projections for all
// rows at once, the short conv and the delta-rule recurrence per sequence.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"
#include "engine/util/status.h"

namespace nj {
namespace {

// Causal depthwise conv + SiLU for one of q/k/v. raw: [T][P] this chunk's pre-conv inputs;
// hist: [K-1][3][P] (oldest first), `which` selects q/k/v. Writes out [T][P] and, when
// `roll`, rolls the history forward. ext is scratch [(K-1)+T][P].
void short_conv_silu(const float* raw, const float* taps, float* hist, int which, int T, int P,
                     int K, float* ext, float* out, bool roll) {
  const size_t p = static_cast<size_t>(P);
  for (int r = 0; r < K - 1; ++r)
    std::copy_n(hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p, p,
                ext + static_cast<size_t>(r) * p);
  std::copy_n(raw, static_cast<size_t>(T) * p, ext + static_cast<size_t>(K - 1) * p);
  // Tap j multiplies input t-K+1+j; tap K-1 is the current token.
  ops::kernels().short_conv(ext, taps, T, P, K, out);
  ops::silu_inplace(out, T * P);
  if (!roll) return;
  for (int r = 0; r < K - 1; ++r)
    std::copy_n(ext + static_cast<size_t>(T + r) * p, p,
                hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p);
}

// Where one tentative step's log for one KDA layer lies in RollbackActivations (the layout
// is in activations.h).
struct LogOffsets {
  size_t conv_in, inputs, snapshots;
};
LogOffsets log_offsets(const ModelConfig& c, const ActivationShape& s, int tentative,
                       int kda_layer) {
  const size_t P = static_cast<size_t>(c.kda_width()), H = static_cast<size_t>(c.kda_heads),
               D = static_cast<size_t>(c.kda_head_dim), tr = static_cast<size_t>(s.tentative_rows);
  const size_t unit = static_cast<size_t>(tentative) * static_cast<size_t>(c.num_kda_layers()) +
                      static_cast<size_t>(kda_layer);
  return LogOffsets{unit * 3 * tr * P, unit * tr * (4 * P + H),
                    tr == 0 ? 0 : unit * (tr - 1) * H * D * D};
}

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

}  // namespace

void kda_forward(const ModelConfig& c, const KdaWeights& w, std::span<const SeqRows> seqs,
                 const float* x, int rows, float* out, KdaActivations& a, RollbackActivations& rb,
                 const ActivationShape& shape, int kda_layer) {
  const int H = c.kda_heads, D = c.kda_head_dim, P = c.kda_width(), K = c.conv_kernel,
            hid = c.hidden;
  const size_t p = static_cast<size_t>(P), TP = static_cast<size_t>(rows) * p,
               hs = static_cast<size_t>(hid);
  float* q = a.q.data();
  float* k = a.k.data();
  float* v = a.v.data();

  // q, k, v = SiLU(conv(W x)): the projection over all rows, the conv per sequence with the
  // last K-1 inputs it carries between passes (a tentative sequence logs its inputs instead
  // of rolling them in; kda_keep does).
  const MatRef* proj[3] = {&w.q_proj, &w.k_proj, &w.v_proj};
  const float* taps[3] = {w.q_conv, w.k_conv, w.v_conv};
  float* dst[3] = {q, k, v};
  const size_t tr = static_cast<size_t>(shape.tentative_rows);
  for (int i = 0; i < 3; ++i) {
    ops::matmul(*proj[i], x, rows, hs, a.raw.data(), p);
    for (const SeqRows& s : seqs) {
      const size_t r0 = static_cast<size_t>(s.row0) * p;
      const bool tentative = s.tentative >= 0;
      short_conv_silu(a.raw.data() + r0, taps[i], s.state->conv.data(), i, s.rows, P, K,
                      a.ext.data(), dst[i] + r0, !tentative);
      if (tentative) {
        NJ_CHECK_MSG(static_cast<size_t>(s.rows) <= tr,
                     "a tentative step has more rows than its log");
        const LogOffsets lo = log_offsets(c, shape, s.tentative, kda_layer);
        std::copy_n(a.raw.data() + r0, static_cast<size_t>(s.rows) * p,
                    rb.conv_in.data() + lo.conv_in + static_cast<size_t>(i) * tr * p);
      }
    }
  }
  // Per head: q, k ← x (Σx² + 1e-6)^-1/2; v is not normed.
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < H; ++h) {
      const size_t o = static_cast<size_t>(t) * p + static_cast<size_t>(h * D);
      ops::l2norm(q + o, D, 1e-6f);
      ops::l2norm(k + o, D, 1e-6f);
    }
  // beta_h = σ(b_proj x)[h]
  float* beta = a.beta.data();
  ops::matmul(w.b_proj, x, rows, hs, beta, static_cast<size_t>(H));
  ops::sigmoid_inplace(beta, rows * H);
  // z = f_b(f_a x) + dt_bias;  g = lb · σ(exp(A_log[h]) · z);  alpha = exp(g)
  float* alpha = a.alpha.data();
  ops::matmul(w.f_a_proj, x, rows, hs, a.za.data(), static_cast<size_t>(D));
  ops::matmul(w.f_b_proj, a.za.data(), rows, static_cast<size_t>(D), alpha, p);
  // z ← z + dt_bias, then lb·σ(ah·z) (or -ah·softplus(z)) and its exp; the sigmoid goes over
  // all rows at once, vectorised (ops::sigmoid_inplace).
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < H; ++h) {
      const float ah = std::exp(w.a_log[h]);
      for (int d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>(h * D + d);
        float& z = alpha[static_cast<size_t>(t) * p + i];
        z = z + w.dt_bias[i];
        z = c.has_gate_lower_bound ? ah * z : -ah * softplus(z);
      }
    }
  if (c.has_gate_lower_bound) {
    ops::sigmoid_inplace(alpha, static_cast<int>(TP));
    for (size_t i = 0; i < TP; ++i) alpha[i] = c.gate_lower_bound * alpha[i];
  }
  ops::exp_inplace(alpha, static_cast<int>(TP));
  // q ← q · D^-1/2
  const float qscale = 1.0f / std::sqrt(static_cast<float>(D));
  for (size_t i = 0; i < TP; ++i) q[i] = q[i] * qscale;

  // A tentative sequence under replay logs what its recurrence reads, for kda_keep.
  const size_t DD = static_cast<size_t>(D) * static_cast<size_t>(D);
  const bool replay = shape.kda_rollback == KdaRollback::kReplay;
  for (const SeqRows& s : seqs) {
    if (s.tentative < 0 || !replay) continue;
    float* log = rb.inputs.data() + log_offsets(c, shape, s.tentative, kda_layer).inputs;
    const size_t n = static_cast<size_t>(s.rows), r0 = static_cast<size_t>(s.row0);
    for (const float* plane : {q, k, v, alpha}) {
      std::copy_n(plane + r0 * p, n * p, log);
      log += tr * p;
    }
    std::copy_n(beta + r0 * static_cast<size_t>(H), n * static_cast<size_t>(H), log);
  }

  // The recurrence: each (sequence, head) on its own state, its tokens in order; pairs are
  // independent, so they split over threads. ud holds [sequence][head][u, delta]. A
  // tentative sequence runs it on a trial copy of S (replay), or in place one row at a time,
  // copying S after each row but the last (snapshots).
  float* o = a.o.data();
  const ops::KernelTable& kt = ops::kernels();
  const int pairs = static_cast<int>(seqs.size()) * H;
  const size_t work = static_cast<size_t>(rows) * DD * static_cast<size_t>(H);
#pragma omp parallel for schedule(static) if (pairs > 1 && work > 32768)
  for (int i = 0; i < pairs; ++i) {
    const SeqRows& s = seqs[static_cast<size_t>(i / H)];
    const int h = i % H;
    const size_t off = static_cast<size_t>(s.row0) * p + static_cast<size_t>(h * D);
    const size_t hb = static_cast<size_t>(s.row0) * static_cast<size_t>(H) + static_cast<size_t>(h);
    float* u = a.ud.data() + static_cast<size_t>(i) * 2 * static_cast<size_t>(D);
    float* S = s.state->S.data() + static_cast<size_t>(h) * DD;
    if (s.tentative >= 0 && replay) {
      float* trial =
          rb.trial.data() +
          (static_cast<size_t>(s.tentative) * static_cast<size_t>(H) + static_cast<size_t>(h)) * DD;
      std::copy_n(S, DD, trial);
      S = trial;
    } else if (s.tentative >= 0) {
      float* snap = rb.snapshots.data() + log_offsets(c, shape, s.tentative, kda_layer).snapshots +
                    static_cast<size_t>(h) * DD;
      for (int t = 0; t < s.rows; ++t) {
        const size_t to = static_cast<size_t>(t) * p;
        kt.kda_head(1, D, q + off + to, k + off + to, v + off + to, alpha + off + to,
                    beta + hb + static_cast<size_t>(t) * static_cast<size_t>(H), p,
                    static_cast<size_t>(H), S, o + off + to, u, u + D);
        if (t + 1 < s.rows)
          std::copy_n(S, DD, snap + static_cast<size_t>(t) * static_cast<size_t>(H) * DD);
      }
      continue;
    }
    kt.kda_head(s.rows, D, q + off, k + off, v + off, alpha + off, beta + hb, p,
                static_cast<size_t>(H), S, o + off, u, u + D);
  }
  // o_h = RMSNorm(o_h, o_norm) per head; then o ⊙ σ(g_proj x); out = o_proj o
  for (int t = 0; t < rows; ++t)
    for (int h = 0; h < H; ++h) {
      float* oh = o + static_cast<size_t>(t) * p + static_cast<size_t>(h * D);
      ops::rmsnorm(oh, w.o_norm, D, c.rms_eps, oh);
    }
  float* gate = a.gate.data();
  ops::matmul(w.g_proj, x, rows, hs, gate, p);
  ops::sigmoid_gate(o, gate, static_cast<int>(TP));
  ops::matmul(w.o_proj, o, rows, p, out, hs);
}

void kda_keep(const ModelConfig& c, LayerState& st, const RollbackActivations& rb,
              const ActivationShape& shape, int tentative, int kda_layer, int rows, int keep,
              KdaActivations& a) {
  NJ_CHECK_MSG(keep >= 1 && keep <= rows && rows <= shape.tentative_rows,
               "kda_keep: rows out of range");
  const int H = c.kda_heads, D = c.kda_head_dim, P = c.kda_width(), K = c.conv_kernel;
  const size_t p = static_cast<size_t>(P), tr = static_cast<size_t>(shape.tentative_rows),
               DD = static_cast<size_t>(D) * static_cast<size_t>(D);
  const LogOffsets lo = log_offsets(c, shape, tentative, kda_layer);
  // Conv history: the last K-1 inputs of (old history, kept rows). Row r of the new history
  // is input keep + r of that sequence, always at or after row r of the old one, so the
  // history is rewritten in place front to back.
  for (int which = 0; which < 3; ++which) {
    const float* in = rb.conv_in.data() + lo.conv_in + static_cast<size_t>(which) * tr * p;
    for (int r = 0; r < K - 1; ++r) {
      const int e = keep + r;  // index into (old history ++ rows)
      float* dst = st.conv.data() + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p;
      const float* src =
          e < K - 1 ? st.conv.data() + (static_cast<size_t>(e) * 3 + static_cast<size_t>(which)) * p
                    : in + static_cast<size_t>(e - (K - 1)) * p;
      std::copy_n(src, p, dst);
    }
  }
  if (shape.kda_rollback == KdaRollback::kSnapshots) {
    // S is the state after the last row; an earlier one was copied during the pass.
    if (keep < rows)
      std::copy_n(rb.snapshots.data() + lo.snapshots +
                      static_cast<size_t>(keep - 1) * static_cast<size_t>(H) * DD,
                  static_cast<size_t>(H) * DD, st.S.data());
    return;
  }
  // Replay: the kept rows' recurrence on the sequence's own S, exactly as the pass ran it.
  const float* in = rb.inputs.data() + lo.inputs;
  const float *q = in, *k = q + tr * p, *v = k + tr * p, *alpha = v + tr * p,
              *beta = alpha + tr * p;
  const ops::KernelTable& kt = ops::kernels();
  const size_t work = static_cast<size_t>(keep) * DD * static_cast<size_t>(H);
#pragma omp parallel for schedule(static) if (H > 1 && work > 32768)
  for (int h = 0; h < H; ++h) {
    const size_t off = static_cast<size_t>(h * D);
    float* u = a.ud.data() + static_cast<size_t>(h) * 2 * static_cast<size_t>(D);
    kt.kda_head(keep, D, q + off, k + off, v + off, alpha + off, beta + static_cast<size_t>(h), p,
                static_cast<size_t>(H), st.S.data() + static_cast<size_t>(h) * DD, a.o.data() + off,
                u, u + D);
  }
}

}  // namespace nj
