// The activations of a forward pass: every buffer a pass computes into, by name and shape.
//
// They are sized from one definition, `visit_buffers` below, which both the allocation and
// the residency planner's estimate (`activation_bytes`) walk: what the planner reserves is
// what a pass allocates. A pass never grows a buffer past the shape it was allocated for
// unless the pass itself is larger (more rows, a longer context), and then only to that.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/config.h"
#include "engine/moe/moe_activations.h"

namespace nj {

// How a tentative pass (batch.h) keeps KDA's recurrence undoable. Memory decides it: replay
// logs ~4 floats per channel and row (q, k, v, alpha) and one trial state per sequence,
// snapshots a whole state per row: at K3's shapes (69 KDA layers, S 6.3 MB per layer) with 8
// drafts, ~0.22 GB against ~3.6 GB per sequence (both with the conv inputs log). Time is
// close: replay redoes the kept rows' recurrence, snapshots copy S after every row
// (tests/bench/run_spec_bench.sh compares both on k3-mini). So replay is the default.
enum class KdaRollback : uint8_t {
  kReplay,     // the pass runs the recurrence on a trial copy of S and logs each row's
               // inputs; keep(n) replays the first n rows on the sequence's own S
  kSnapshots,  // the pass advances S in place and copies it after every row; keep(n)
               // copies back the one after row n-1
};
inline constexpr KdaRollback kDefaultKdaRollback = KdaRollback::kReplay;

// What the activations are sized for.
struct ActivationShape {
  int rows = 1;         // token rows in one pass, over all its sequences
  int sequences = 1;    // sequences in one pass
  int max_context = 1;  // positions one sequence may attend over (MLA scores)
  int logits_rows = 1;  // rows whose logits a pass computes
  // Tentative steps in one pass, and the rows each may carry (1 + drafted tokens).
  int tentative_sequences = 0;
  int tentative_rows = 0;
  KdaRollback kda_rollback = kDefaultKdaRollback;
  // Only the attention half's scratch (KDA, MLA): a layer sweep's chunk, whose stream and FFN
  // buffers are the window's (engine/sweep/sweep.h).
  bool attention_only = false;
};

// Stream and head: the residual stream of every row, and the attention-residual bank.
struct StreamActivations {
  Buf<float> h;       // [rows][hidden] the stream entering attn_res
  Buf<float> prefix;  // [rows][hidden] the running sum since the last block boundary
  Buf<float> blocks;  // [max_blocks][rows][hidden] snapshots of block inputs
  Buf<float> xn;      // [rows][hidden] normed input to attention / FFN
  Buf<float> a;       // [rows][hidden] attention or FFN output
  Buf<float> tmp;     // [rows][hidden] the head's mixed stream
  Buf<float> mix;     // [max_blocks + 1] attn_res source weights of one row
  Buf<float> head_in; // [logits_rows][hidden] normed rows whose logits are wanted
  Buf<float> logits;  // [logits_rows][vocab]
};

// KDA (k3-model.md §4), all rows; the recurrence runs per sequence on its rows.
struct KdaActivations {
  Buf<float> q, k, v;  // [rows][P] after conv + SiLU (q, k normed per head)
  Buf<float> raw;      // [rows][P] one projection before its conv
  Buf<float> ext;      // [(K-1)·sequences + rows][P] each sequence's conv history, then its rows
  Buf<float> beta;     // [rows][H]
  Buf<float> za;       // [rows][D] f_a x
  Buf<float> alpha;    // [rows][P] per-channel decay
  Buf<float> o;        // [rows][P] recurrence output
  Buf<float> gate;     // [rows][P] g_proj x
  Buf<float> ud;       // [sequences][H][2][D] recurrence scratch (u, delta)
};

// Gated MLA (k3-model.md §5), all rows; the cache and attention run per sequence.
struct MlaActivations {
  Buf<float> qa;        // [rows][q_lora_rank]
  Buf<float> q;         // [rows][heads][nope + rope]
  Buf<float> ckv;       // [rows][kv_lora_rank + rope]
  Buf<float> o;         // [rows][heads][v_head_dim]
  Buf<float> gate;      // [rows][heads][v_head_dim]
  Buf<float> per_head;  // [heads][2 kv_lora_rank + max_context]: q_abs, ctx, scores
};

// What a pass keeps of its tentative steps so that each can settle on any prefix of its
// rows (Forward::keep). Per tentative step and KDA layer, both modes log the rows' pre-conv
// inputs (the conv history is rolled forward only by keep); replay also logs the
// recurrence's inputs and runs the pass's recurrence on a trial copy, snapshots keep S after
// each row. MLA needs nothing: its cache is truncated.
struct RollbackActivations {
  Buf<float> conv_in;  // [tentative][kda_layers][3][tentative_rows][P] raw q, k, v
  Buf<float> inputs;   // replay: [tentative][kda_layers] planes q, k, v, alpha [tentative_rows][P]
                       // and beta [tentative_rows][H], as the recurrence reads them
  Buf<float> trial;    // replay: [tentative][H][D][D] the pass's recurrence, one layer at a time
  Buf<float> snapshots;  // snapshots: [tentative][kda_layers][tentative_rows - 1][H][D][D]
};

// Matrix kernels arrange BF16/MXFP4 activations into thread-local scratch of their own
// (engine/ops/kernels.h); not allocated here, but counted by the estimate.
struct Activations {
  StreamActivations stream;
  KdaActivations kda;
  MlaActivations mla;
  MoeActivations moe;
  FfnActivations ffn;
  RollbackActivations rollback;
  ActivationShape shape;  // what they are allocated for

  // Sizes every buffer for `s` (growing only). REQUIRES: s's fields >= 1.
  void allocate(const ModelConfig& c, const ActivationShape& s);
  // Grows to cover `s` where it exceeds the current shape (field by field).
  void ensure(const ModelConfig& c, const ActivationShape& s);
  // Bytes held by the buffers (their capacities).
  uint64_t allocated_bytes() const;

 private:
  const ModelConfig* config_ = nullptr;  // of the last allocate(); must outlive this
};

// Bytes of the kernels' thread-local scratch for passes of `rows` rows: the arranged input,
// and each thread's packed panel (ops::KernelTable::packed_scratch_bytes).
uint64_t kernel_scratch_bytes(const ModelConfig& c, int rows);

// Bytes of activations a pass of shape `s` needs, including the kernels' scratch: the
// residency planner's estimate. The same definition allocates them.
uint64_t activation_bytes(const ModelConfig& c, const ActivationShape& s);

// The single definition of every buffer's size: calls f(buffer, element_count) for each.
template <class A, class F>
void visit_buffers(A& a, const ModelConfig& c, const ActivationShape& s, F&& f) {
  const size_t R = static_cast<size_t>(s.rows), hid = static_cast<size_t>(c.hidden);
  const size_t blocks = static_cast<size_t>((c.layers - 1) / c.attn_res_block_size + 1);
  const size_t LR = static_cast<size_t>(s.logits_rows), vocab = static_cast<size_t>(c.vocab);
  const size_t whole = s.attention_only ? 0 : 1;  // the stream and head buffers, or none
  f(a.stream.h, whole * R * hid);
  f(a.stream.prefix, whole * R * hid);
  f(a.stream.blocks, whole * blocks * R * hid);
  f(a.stream.xn, whole * R * hid);
  f(a.stream.a, whole * R * hid);
  f(a.stream.tmp, whole * R * hid);
  f(a.stream.mix, whole * (blocks + 1));
  f(a.stream.head_in, whole * LR * hid);
  f(a.stream.logits, whole * LR * vocab);

  if (c.num_kda_layers() > 0) {
    const size_t P = static_cast<size_t>(c.kda_width()), H = static_cast<size_t>(c.kda_heads),
                 D = static_cast<size_t>(c.kda_head_dim), K = static_cast<size_t>(c.conv_kernel);
    for (auto* b : {&a.kda.q, &a.kda.k, &a.kda.v, &a.kda.raw, &a.kda.alpha, &a.kda.o, &a.kda.gate})
      f(*b, R * P);
    f(a.kda.ext, ((K - 1) * static_cast<size_t>(s.sequences) + R) * P);
    f(a.kda.beta, R * H);
    f(a.kda.za, R * D);
    f(a.kda.ud, static_cast<size_t>(s.sequences) * H * 2 * D);
    const size_t ts = static_cast<size_t>(s.tentative_sequences),
                 tr = static_cast<size_t>(s.tentative_rows),
                 layers = static_cast<size_t>(c.num_kda_layers()), DD = D * D;
    const bool replay = s.kda_rollback == KdaRollback::kReplay;
    f(a.rollback.conv_in, ts * layers * 3 * tr * P);
    f(a.rollback.inputs, replay ? ts * layers * tr * (4 * P + H) : 0);
    f(a.rollback.trial, replay ? ts * H * DD : 0);
    f(a.rollback.snapshots, replay || tr == 0 ? 0 : ts * layers * (tr - 1) * H * DD);
  }
  if (c.num_mla_layers() > 0) {
    const size_t nh = static_cast<size_t>(c.heads), kvl = static_cast<size_t>(c.kv_lora_rank),
                 rope = static_cast<size_t>(c.qk_rope),
                 qk = static_cast<size_t>(c.qk_nope + c.qk_rope),
                 vd = static_cast<size_t>(c.v_head_dim);
    f(a.mla.qa, R * static_cast<size_t>(c.q_lora_rank));
    f(a.mla.q, R * nh * qk);
    f(a.mla.ckv, R * (kvl + rope));
    f(a.mla.o, R * nh * vd);
    f(a.mla.gate, R * nh * vd);
    f(a.mla.per_head, nh * (2 * kvl + static_cast<size_t>(s.max_context)));
  }
  if (!s.attention_only) visit_ffn_buffers(a.moe, a.ffn, c, R, R, f);
}

}  // namespace nj
