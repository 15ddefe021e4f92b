// The layer sweep (see sweep.h): a window of prefill work, layer by layer.
#include "engine/sweep/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "engine/forward/decoder_layer.h"
#include "engine/moe/ffn.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/kernels.h"
#include "engine/sweep/layer_chunks.h"

namespace nj {
namespace {

using Clock = std::chrono::steady_clock;

// The window's residual stream (what crosses layer boundaries) and the FFN half's buffers,
// all sized for the window's rows. One buffer per row serves as h at the layer boundaries
// and as the running prefix inside a layer (prefix = h as the layer starts; between the
// halves h is dead: the FFN reads xn); the attention half's h is a chunk's, and so is the
// output of either half (each is added to the prefix a chunk at a time).
struct WindowBuffers {
  std::vector<float> h, chunk_h, blocks, xn, a, mix;  // [rows][hidden]; chunk_h, a [chunk
                                                      // rows][hidden]; blocks [banks][rows][hidden]
  MoeActivations moe;
  FfnActivations ffn;
};

// The MLP (dense and shared expert) runs `ffn_rows` rows at a time.
template <class W, class F>
void visit_window(W& w, const ModelConfig& c, size_t R, size_t ffn_rows, F&& f) {
  const size_t hs = static_cast<size_t>(c.hidden);
  const size_t banks = static_cast<size_t>(banked_before(c, c.layers));
  f(w.h, R * hs);
  f(w.chunk_h, ffn_rows * hs);
  f(w.blocks, banks * R * hs);
  f(w.xn, R * hs);
  f(w.a, ffn_rows * hs);
  f(w.mix, banks + 1);
  visit_ffn_buffers(w.moe, w.ffn, c, R, ffn_rows, f);
}

// A chunk holds the sequences that start in it and the one it goes on with.
ActivationShape chunk_shape(const SweepShape& s) {
  return ActivationShape{std::max(1, s.chunk_rows),
                         std::max(1, std::min({s.sequences, s.chunk_rows, s.chunk_sequences + 1})),
                         std::max(1, s.max_context),
                         1,
                         0,
                         0,
                         kDefaultKdaRollback,
                         /*attention_only=*/true};
}

}  // namespace

uint64_t sweep_activation_bytes(const ModelConfig& c, const SweepShape& s) {
  WindowBuffers none;
  uint64_t bytes = 0;
  visit_window(none, c, static_cast<size_t>(std::max(1, s.rows)), static_cast<size_t>(std::max(1, s.chunk_rows)),
               [&](auto& buf, size_t n) { bytes += n * sizeof(buf[0]); });
  // The head: the wanted rows' inputs and logits (the logits are the caller's answer, so
  // bounded by what it asks for), and one row of scratch.
  const uint64_t head = (static_cast<uint64_t>(std::max(1, s.logits_rows)) *
                             (static_cast<uint64_t>(c.hidden) + static_cast<uint64_t>(c.vocab)) +
                         static_cast<uint64_t>(c.hidden)) *
                        sizeof(float);
  return bytes + activation_bytes(c, chunk_shape(s)) + head;
}

Sweep::Sweep(const ModelConfig& config, WeightSource& weights, SweepOptions options)
    : config_(config), weights_(weights), options_(options) {}

Status Sweep::validate(std::span<const SweepSequence> seqs, const SweepProgress* progress) const {
  const ModelConfig& c = config_;
  if (seqs.empty()) return invalid_argument("a sweep needs at least one sequence");
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SweepSequence& s = seqs[i];
    const std::string which = "sequence " + std::to_string(i) + " of the sweep";
    if (s.ids.empty()) return invalid_argument(which + " has no tokens");
    if (s.parent >= static_cast<int>(i)) return invalid_argument(which + " continues a later sequence");
    if (s.parent >= 0 && s.start) return invalid_argument(which + " has both a parent and a start state");
    if (s.start && s.start->layers.size() != static_cast<size_t>(c.layers))
      return invalid_argument(which + ": its start state is shaped for another model");
    if (s.logits == LogitsWanted::kAll && !s.all_logits)
      return invalid_argument(which + " asks for every position's logits but gives no destination");
    if (s.final_state && progress)
      return invalid_argument(which + " asks for its final state in a sweep that may resume at a layer");
    for (int32_t id : s.ids)
      if (id < 0 || id >= c.vocab)
        return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                std::to_string(c.vocab - 1) + ")");
  }
  return Status();
}

Status Sweep::run(std::span<SweepSequence> seqs, SweepProgress* progress) {
  NJ_RETURN_IF_ERROR(validate(seqs, progress));
  const ModelConfig& c = config_;
  WeightSource& src = weights_;
  const auto t_start = Clock::now();
  const WeightStats before = src.stats();
  const int S = static_cast<int>(seqs.size());
  const size_t hs = static_cast<size_t>(c.hidden), vocab = static_cast<size_t>(c.vocab);

  // Each sequence's first position, and the window's rows as LayerChunks lays them out
  // (generation by generation, so that a branch's parent has all its rows of a layer done
  // before the branch starts).
  std::vector<int64_t> position0(seqs.size(), 0);
  std::vector<int> parents(seqs.size()), lengths(seqs.size());
  for (int i = 0; i < S; ++i) {
    const SweepSequence& s = seqs[static_cast<size_t>(i)];
    parents[static_cast<size_t>(i)] = s.parent;
    lengths[static_cast<size_t>(i)] = static_cast<int>(s.ids.size());
    if (s.parent >= 0) {
      const auto p = static_cast<size_t>(s.parent);
      position0[static_cast<size_t>(i)] = position0[p] + static_cast<int64_t>(seqs[p].ids.size());
    } else if (s.start) {
      position0[static_cast<size_t>(i)] = s.start->position;
    }
  }
  LayerChunks layer_chunks(parents, lengths, std::max(1, options_.chunk_rows),
                           std::max(1, options_.chunk_sequences), options_.waiting_parents);
  const std::vector<int>& order = layer_chunks.order();  // sequences in row order
  std::vector<int32_t> ids;
  int R = 0, context = 1;
  std::vector<int> wanted;  // rows whose logits are asked for, in row order
  for (int i : order) {
    const SweepSequence& s = seqs[static_cast<size_t>(i)];
    const int n = static_cast<int>(s.ids.size());
    const int first = s.logits == LogitsWanted::kAll ? 0 : s.logits == LogitsWanted::kLast ? n - 1 : n;
    for (int t = first; t < n; ++t) wanted.push_back(R + t);
    R += n;
    ids.insert(ids.end(), s.ids.begin(), s.ids.end());
    context = static_cast<int>(std::max<int64_t>(context, position0[static_cast<size_t>(i)] + n));
  }
  const SweepShape shape{
      R,       std::max(1, options_.chunk_rows), S,
      context, static_cast<int>(wanted.size()),  std::max(1, options_.chunk_sequences)};

  WindowBuffers win;
  visit_window(win, c, static_cast<size_t>(R), static_cast<size_t>(shape.chunk_rows),
               [](auto& buf, size_t n) { buf.resize(n); });
  Activations chunk;
  chunk.allocate(c, chunk_shape(shape));
  const StreamRows all{R,
                       win.h.data(),
                       win.h.data(),
                       win.blocks.data(),
                       static_cast<size_t>(R) * hs,
                       win.xn.data(),
                       nullptr,
                       win.mix.data()};  // a: a chunk's (win.a)
  double wait = 0;
  auto timed = [&](auto&& fn) {
    auto t0 = Clock::now();
    auto r = fn();
    wait += std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };

  last_ = SweepStats{};
  last_.distinct_experts.assign(static_cast<size_t>(c.layers), 0);
  for (int i = 0; i < S; ++i) {
    SequenceState* f = seqs[static_cast<size_t>(i)].final_state;
    if (f) f->layers.assign(static_cast<size_t>(c.layers), LayerState{});
  }

  // h = embed_tokens[id], or a boundary saved by an earlier sweep of this window
  auto boundary = [&](int layer) {
    return SweepBoundary{layer, R, c.hidden, banked_before(c, layer), win.h.data(), win.blocks.data(),
                         static_cast<size_t>(R) * hs};
  };
  int first_layer = 0;
  if (progress) {
    SweepBoundary b = boundary(0);
    NJ_RETURN_IF_ERROR(progress->resume(b));
    if (b.layer != 0 && (b.layer < 1 || b.layer >= c.layers || b.banked != banked_before(c, b.layer)))
      return invalid_argument("a sweep cannot resume at layer " + std::to_string(b.layer) + " with " +
                              std::to_string(b.banked) + " bank entries");
    first_layer = b.layer;
  }
  if (first_layer == 0) NJ_RETURN_IF_ERROR(timed([&] { return src.embed(ids, win.h.data()); }));
  std::vector<LayerState> states(seqs.size());  // each sequence's state of the current layer
  std::vector<SeqRows> chunk_rows;
  MoeCounters moe;
  int kda_layer = 0;  // l's index among the KDA layers
  for (int l = 0; l < first_layer; ++l)
    if (c.attention[static_cast<size_t>(l)] != AttentionKind::kMla) ++kda_layer;
  src.will_need_layer(first_layer);
  for (int l = first_layer; l < c.layers; ++l) {
    auto got = timed([&] { return src.layer(l); });
    if (!got.ok()) return got.status();
    const LayerWeights& w = **got;
    if (l + 1 < c.layers) src.will_need_layer(l + 1);

    // The attention half, chunk by chunk, each chunk within one generation (LayerChunks).
    layer_chunks.begin_layer();
    for (LayerChunks::Chunk k; layer_chunks.next(k);) {
      chunk_rows.clear();
      for (int i : k.starting) {  // from its start state, empty, or its parent's end
        const SweepSequence& s = seqs[static_cast<size_t>(i)];
        if (s.parent >= 0) {
          const auto p = static_cast<size_t>(s.parent);
          if (layer_chunks.last_branch(i) && !seqs[p].final_state)
            states[static_cast<size_t>(i)] = std::move(states[p]);
          else
            states[static_cast<size_t>(i)] = states[p];
        } else {
          states[static_cast<size_t>(i)] =
              s.start ? s.start->layers[static_cast<size_t>(l)] : LayerState::empty(c, l);
        }
      }
      for (int i : k.sequences) {
        const int a0 = layer_chunks.row0(i);
        const int a1 = a0 + lengths[static_cast<size_t>(i)];
        const int lo = std::max(a0, k.row0), hi = std::min(a1, k.row0 + k.rows);
        chunk_rows.push_back(SeqRows{&states[static_cast<size_t>(i)], lo - k.row0, hi - lo, -1});
      }
      // The chunk's h enters as the window's stream; the stream becomes its prefix.
      StreamRows rows = all.slice(k.row0, k.rows, c.hidden);
      std::copy_n(rows.prefix, static_cast<size_t>(k.rows) * hs, win.chunk_h.data());
      rows.h = win.chunk_h.data();
      rows.a = win.a.data();
      attention_half(c, l, w, rows, chunk_rows, chunk, kda_layer);
      for (int i : layer_chunks.finish(k)) {  // done, and every branch of it started
        SequenceState* f = seqs[static_cast<size_t>(i)].final_state;
        if (f) f->layers[static_cast<size_t>(l)] = std::move(states[static_cast<size_t>(i)]);
        states[static_cast<size_t>(i)] = LayerState{};
      }
    }
    if (!w.is_mla) ++kda_layer;

    // The FFN half over the whole window: each routed expert once for all its rows; then the
    // MLPs (dense and shared), the FFN's output and the residual a chunk of rows at a time.
    if (!w.is_dense) {
      NJ_RETURN_IF_ERROR(moe_experts(c, l, w.moe, src, win.xn.data(), R, win.moe, &moe));
      last_.distinct_experts[static_cast<size_t>(l)] = moe.distinct_experts;
    }
    for (int r = 0, n = 0; r < R; r += n) {
      n = std::min(shape.chunk_rows, R - r);
      if (w.is_dense)
        ffn_forward(c, w.dense, win.xn.data() + static_cast<size_t>(r) * hs, n, win.a.data(),
                    win.ffn);
      else
        moe_output(c, w.moe, win.xn.data(), r, n, win.a.data(), win.moe, win.ffn);
      StreamRows rows = all.slice(r, n, c.hidden);
      rows.a = win.a.data();
      finish_layer(c, rows);
    }
    if (progress && l + 1 < c.layers && progress->at_boundary(boundary(l + 1))) {
      src.end_step();
      return cancelled("the sweep stopped before layer " + std::to_string(l + 1));
    }
  }

  // logits = lm_head(RMSNorm(attn_res(blocks + [h]), norm)) for the wanted rows: their inputs
  // first (the norms are in the head's first part), then each part of lm_head's rows over them
  std::vector<float> logits(wanted.size() * vocab);
  {
    std::vector<float> head_in(wanted.size() * hs), tmp(hs);
    for (int part = 0; part < src.head_parts(); ++part) {
      auto head = timed([&] { return src.head(part); });
      if (!head.ok()) return head.status();
      const HeadWeights& hw = **head;
      if (part == 0)
        for (size_t k = 0; k < wanted.size(); ++k)
          head_input(c, hw, all, std::span<const int>(wanted.data() + k, 1), tmp.data(), head_in.data() + k * hs);
      for (size_t k = 0; k < wanted.size(); k += static_cast<size_t>(shape.chunk_rows)) {
        const size_t n = std::min(wanted.size() - k, static_cast<size_t>(shape.chunk_rows));
        ops::matmul(hw.lm_head, head_in.data() + k * hs, static_cast<int>(n), hs,
                    logits.data() + k * vocab + static_cast<size_t>(hw.first_row), vocab);
      }
    }
  }
  src.end_step();

  // Hand each sequence its logits (NaN or infinity stop the sweep before anything moves).
  std::vector<size_t> first_logit(seqs.size(), 0);
  for (size_t k = 0, i = 0; i < order.size(); ++i) {
    const int q = order[i];
    first_logit[static_cast<size_t>(q)] = k;
    const SweepSequence& s = seqs[static_cast<size_t>(q)];
    const size_t n = s.ids.size();
    const size_t count = s.logits == LogitsWanted::kAll ? n : s.logits == LogitsWanted::kLast ? 1 : 0;
    for (size_t t = 0; t < count; ++t)
      for (size_t v = 0; v < vocab; ++v)
        if (!std::isfinite(logits[(k + t) * vocab + v]))
          return non_finite("non-finite logits at position " +
                            std::to_string(position0[static_cast<size_t>(q)] + static_cast<int64_t>(n - count + t)));
    k += count;
  }
  for (int i = 0; i < S; ++i) {
    SweepSequence& s = seqs[static_cast<size_t>(i)];
    const size_t n = s.ids.size();
    const float* out = logits.data() + first_logit[static_cast<size_t>(i)] * vocab;
    const size_t count = s.logits == LogitsWanted::kAll ? n : s.logits == LogitsWanted::kLast ? 1 : 0;
    if (s.logits == LogitsWanted::kAll) std::copy_n(out, n * vocab, s.all_logits);
    if (s.last_logits) {
      if (count > 0) s.last_logits->assign(out + (count - 1) * vocab, out + count * vocab);
      else s.last_logits->clear();
    }
    if (SequenceState* f = s.final_state) {
      f->position = position0[static_cast<size_t>(i)] + static_cast<int64_t>(n);
      std::vector<int32_t> tokens;
      for (int q = i; q >= 0; q = seqs[static_cast<size_t>(q)].parent) {  // the ancestry's tokens
        const SweepSequence& a = seqs[static_cast<size_t>(q)];
        tokens.insert(tokens.begin(), a.ids.begin(), a.ids.end());
        if (a.parent < 0 && a.start)
          tokens.insert(tokens.begin(), a.start->tokens.begin(), a.start->tokens.end());
      }
      f->tokens = std::move(tokens);
      if (count > 0) f->last_logits.assign(out + (count - 1) * vocab, out + count * vocab);
      else f->last_logits.clear();
    }
  }

  // Totals, and each sequence's share by its rows.
  const double total = std::chrono::duration<double>(Clock::now() - t_start).count();
  wait += moe.wait_s;
  const WeightStats after = src.stats();
  last_.sequences = S;
  last_.roots = static_cast<int>(
      std::count_if(seqs.begin(), seqs.end(), [](const SweepSequence& s) { return s.parent < 0; }));
  last_.rows = R;
  last_.peak_states = layer_chunks.peak_states();
  last_.wait_s = wait;
  last_.compute_s = total - wait;
  last_.trunk_bytes_read = (after.trunk_bytes_read - before.trunk_bytes_read) +
                           (after.head_bytes_read - before.head_bytes_read);
  last_.expert_bytes_read = after.expert_bytes_read - before.expert_bytes_read;
  last_.other_bytes_read = after.embedding_bytes_read - before.embedding_bytes_read;
  last_.expert_computations = moe.expert_computations;
  // The window's work is shared by the rows of the sequences that are someone's (a sequence
  // without usage, such as a job's template prefix computed for the window's documents, is
  // paid for by them all), and a sequence's batch is the window's users: a document's label
  // paths share its usage and are part of it, not other sequences sharing the sweep.
  std::vector<SequenceUsage*> users;
  SweepStats charged = last_;
  charged.rows = 0;
  for (const SweepSequence& s : seqs) {
    if (!s.usage) continue;
    charged.rows += static_cast<int>(s.ids.size());
    if (std::find(users.begin(), users.end(), s.usage) == users.end()) users.push_back(s.usage);
  }
  for (const SweepSequence& s : seqs) {
    if (!s.usage) continue;
    SequenceUsage u = usage_share(s.ids.size(), charged);
    u.max_batch = static_cast<int>(users.size());
    s.usage->add(u);
  }
  return Status();
}

}  // namespace nj
