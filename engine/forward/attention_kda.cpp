// KDA, Kimi Delta Attention (k3-model.md §4), over the rows of a pass: projections for all
// rows at once, the short conv and the delta-rule recurrence per sequence.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"
#include "engine/ops/parallel.h"
#include "engine/util/status.h"

namespace nj {
namespace {

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

// Causal depthwise conv + SiLU for one of q/k/v over every sequence of the pass. raw: [rows][P]
// the pre-conv inputs; each sequence's history is [K-1][3][P] (oldest first) in its state,
// `which` selects q/k/v. Writes out [rows][P]; rolls each history forward unless the sequence
// is tentative (whose inputs go to its log instead). ext: scratch of (K-1) rows per sequence
// plus the pass's rows, each sequence's history followed by its rows. The rows of all
// sequences split over the threads: a row's conv reads only ext, so any split gives its bits.
void short_conv_silu(const ModelConfig& c, std::span<const SeqRows> seqs, const float* raw,
                     const float* taps, int which, int rows, const ActivationShape& shape,
                     int kda_layer, float* ext, float* out, RollbackActivations& rb) {
  const int P = c.kda_width(), K = c.conv_kernel;
  const size_t p = static_cast<size_t>(P), S = seqs.size(), tr = static_cast<size_t>(shape.tentative_rows);
  constexpr int kRowsPerItem = 8;
  struct Item {
    int seq, t0, t1;
  };
  std::vector<size_t> at(S);  // each sequence's first ext row
  std::vector<Item> items;
  size_t next = 0;
  for (size_t i = 0; i < S; ++i) {
    at[i] = next;
    next += static_cast<size_t>(K - 1 + seqs[i].rows);
    for (int t0 = 0; t0 < seqs[i].rows; t0 += kRowsPerItem)
      items.push_back({static_cast<int>(i), t0, std::min(seqs[i].rows, t0 + kRowsPerItem)});
  }
  const int n_items = static_cast<int>(items.size()), n_seqs = static_cast<int>(S);
  const double work = static_cast<double>(rows) * static_cast<double>(P) * (K + 8);
#pragma omp parallel if (n_items > 1 && work >= ops::parallel_min_work.load(std::memory_order_relaxed))
  {
#pragma omp for schedule(static)
    for (int i = 0; i < n_seqs; ++i) {
      const SeqRows& s = seqs[static_cast<size_t>(i)];
      const float* hist = s.state->conv.data();
      float* e = ext + at[static_cast<size_t>(i)] * p;
      for (int r = 0; r < K - 1; ++r)
        std::copy_n(hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p, p,
                    e + static_cast<size_t>(r) * p);
      std::copy_n(raw + static_cast<size_t>(s.row0) * p, static_cast<size_t>(s.rows) * p,
                  e + static_cast<size_t>(K - 1) * p);
    }
    // Tap j multiplies input t-K+1+j; tap K-1 is the current token.
#pragma omp for schedule(static)
    for (int i = 0; i < n_items; ++i) {
      const Item& it = items[static_cast<size_t>(i)];
      const SeqRows& s = seqs[static_cast<size_t>(it.seq)];
      const size_t t0 = static_cast<size_t>(it.t0), n = static_cast<size_t>(it.t1 - it.t0);
      float* o = out + (static_cast<size_t>(s.row0) + t0) * p;
      ops::kernels().short_conv(ext + (at[static_cast<size_t>(it.seq)] + t0) * p, taps, static_cast<int>(n), P,
                                K, o);
      ops::silu_inplace(o, static_cast<int>(n * p));
    }
#pragma omp for schedule(static)
    for (int i = 0; i < n_seqs; ++i) {
      const SeqRows& s = seqs[static_cast<size_t>(i)];
      if (s.tentative >= 0) {
        NJ_CHECK_MSG(static_cast<size_t>(s.rows) <= tr, "a tentative step has more rows than its log");
        const LogOffsets lo = log_offsets(c, shape, s.tentative, kda_layer);
        std::copy_n(raw + static_cast<size_t>(s.row0) * p, static_cast<size_t>(s.rows) * p,
                    rb.conv_in.data() + lo.conv_in + static_cast<size_t>(which) * tr * p);
        continue;
      }
      const float* e = ext + at[static_cast<size_t>(i)] * p;
      float* hist = s.state->conv.data();
      for (int r = 0; r < K - 1; ++r)
        std::copy_n(e + static_cast<size_t>(s.rows + r) * p, p,
                    hist + (static_cast<size_t>(r) * 3 + static_cast<size_t>(which)) * p);
    }
  }
}

float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

}  // namespace

void kda_forward(const ModelConfig& c, const KdaWeights& w, std::span<const SeqRows> seqs,
                 const float* x, int rows, float* out, KdaActivations& a, RollbackActivations& rb,
                 const ActivationShape& shape, int kda_layer) {
  const int H = c.kda_heads, D = c.kda_head_dim, P = c.kda_width(), hid = c.hidden;
  const size_t p = static_cast<size_t>(P), hs = static_cast<size_t>(hid);
  float* q = a.q.data();
  float* k = a.k.data();
  float* v = a.v.data();

  // q, k, v = SiLU(conv(W x)): the projection over all rows, the conv per sequence with the
  // last K-1 inputs it carries between passes (a tentative sequence logs its inputs instead
  // of rolling them in; kda_keep does).
  const MatRef* proj[3] = {&w.q_proj, &w.k_proj, &w.v_proj};
  const float* taps[3] = {w.q_conv, w.k_conv, w.v_conv};
  float* dst[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    ops::matmul(*proj[i], x, rows, hs, a.raw.data(), p);
    short_conv_silu(c, seqs, a.raw.data(), taps[i], i, rows, shape, kda_layer, a.ext.data(), dst[i], rb);
  }
  // Per head: q, k ← x (Σx² + 1e-6)^-1/2, then q ← q · D^-1/2; v is not normed. (This and
  // the other elementwise steps below treat each row alone: rows split over the threads.)
  const float qscale = 1.0f / std::sqrt(static_cast<float>(D));
  ops::parallel_rows(rows, 6.0 * static_cast<double>(P), [&](int first, int last) {
    for (int t = first; t < last; ++t)
      for (int h = 0; h < H; ++h) {
        const size_t o = static_cast<size_t>(t) * p + static_cast<size_t>(h * D);
        ops::l2norm(q + o, D, 1e-6f);
        ops::l2norm(k + o, D, 1e-6f);
      }
    for (size_t i = static_cast<size_t>(first) * p; i < static_cast<size_t>(last) * p; ++i) q[i] = q[i] * qscale;
  });
  // beta_h = σ(b_proj x)[h]
  float* beta = a.beta.data();
  ops::matmul(w.b_proj, x, rows, hs, beta, static_cast<size_t>(H));
  ops::sigmoid_inplace(beta, rows * H);
  // z = f_b(f_a x) + dt_bias;  g = lb · σ(exp(A_log[h]) · z);  alpha = exp(g)
  float* alpha = a.alpha.data();
  ops::matmul(w.f_a_proj, x, rows, hs, a.za.data(), static_cast<size_t>(D));
  ops::matmul(w.f_b_proj, a.za.data(), rows, static_cast<size_t>(D), alpha, p);
  // z ← z + dt_bias, then lb·σ(ah·z) (or -ah·softplus(z)) and its exp; the sigmoid goes over
  // a range of rows at once, vectorised (ops::sigmoid_inplace).
  ops::parallel_rows(rows, 30.0 * static_cast<double>(P), [&](int first, int last) {
    for (int t = first; t < last; ++t)
      for (int h = 0; h < H; ++h) {
        const float ah = std::exp(w.a_log[h]);
        for (int d = 0; d < D; ++d) {
          const size_t i = static_cast<size_t>(h * D + d);
          float& z = alpha[static_cast<size_t>(t) * p + i];
          z = z + w.dt_bias[i];
          z = c.has_gate_lower_bound ? ah * z : -ah * softplus(z);
        }
      }
    float* al = alpha + static_cast<size_t>(first) * p;
    const size_t n = static_cast<size_t>(last - first) * p;
    if (c.has_gate_lower_bound) {
      ops::sigmoid_inplace(al, static_cast<int>(n));
      for (size_t i = 0; i < n; ++i) al[i] = c.gate_lower_bound * al[i];
    }
    ops::exp_inplace(al, static_cast<int>(n));
  });

  // A tentative sequence under replay logs what its recurrence reads, for kda_keep.
  const size_t DD = static_cast<size_t>(D) * static_cast<size_t>(D);
  const bool replay = shape.kda_rollback == KdaRollback::kReplay;
  const size_t tr = static_cast<size_t>(shape.tentative_rows);
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
  ops::rmsnorm_rows(o, w.o_norm, rows * H, D, c.rms_eps, o);
  float* gate = a.gate.data();
  ops::matmul(w.g_proj, x, rows, hs, gate, p);
  ops::parallel_rows(rows, 20.0 * static_cast<double>(P), [&](int first, int last) {
    const size_t r0 = static_cast<size_t>(first) * p;
    ops::sigmoid_gate(o + r0, gate + r0, static_cast<int>(static_cast<size_t>(last - first) * p));
  });
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
